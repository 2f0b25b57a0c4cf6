// Fails when regenerating src/gen/ from proto/ changes the tree: generated code must be
// committed exactly as buf produces it.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, cpSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";

const root = new URL("..", import.meta.url).pathname;
const work = mkdtempSync(join(tmpdir(), "codemode-gen-"));
try {
  cpSync(join(root, "proto"), join(work, "proto"), { recursive: true });
  cpSync(join(root, "buf.yaml"), join(work, "buf.yaml"));
  cpSync(join(root, "buf.gen.yaml"), join(work, "buf.gen.yaml"));
  const bin = join(root, "node_modules", ".bin");
  execFileSync(join(bin, "buf"), ["generate"], { cwd: work, stdio: "inherit", env: { ...process.env, PATH: `${bin}:${process.env.PATH}` } });
  const list = (dir) => {
    const out = [];
    const walk = (d) => {
      for (const name of readdirSync(d)) {
        const p = join(d, name);
        if (statSync(p).isDirectory()) walk(p);
        else out.push(relative(dir, p));
      }
    };
    walk(dir);
    return out.sort();
  };
  const want = list(join(work, "src/gen"));
  const have = list(join(root, "src/gen"));
  const problems = [];
  for (const f of new Set([...want, ...have])) {
    if (!want.includes(f)) problems.push(`extra file src/gen/${f}`);
    else if (!have.includes(f)) problems.push(`missing file src/gen/${f}`);
    else if (readFileSync(join(work, "src/gen", f), "utf8") !== readFileSync(join(root, "src/gen", f), "utf8")) problems.push(`stale file src/gen/${f}`);
  }
  if (problems.length > 0) {
    console.error(`src/gen/ is out of date with proto/ (run npm run generate):\n  ${problems.join("\n  ")}`);
    process.exit(1);
  }
  console.log(`src/gen/ matches proto/ (${want.length} files)`);
} finally {
  rmSync(work, { recursive: true, force: true });
}

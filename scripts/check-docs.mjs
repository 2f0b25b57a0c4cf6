/**
 * `npm run check:docs` (part of `npm test`): checks that README.md and docs/**.md name only
 * paths and `file:function` pointers that exist and link only to pages and headings that do,
 * and that module headers in src/ (not src/gen) point only at files that exist. The rules are
 * ./check-docs-core.mjs. Prints each problem as `file:line: message` and exits 1 when there
 * is one.
 *
 * The repository is what git lists (tracked files, and new ones not ignored) that exists on
 * disk, so a path passes here exactly when it would in a fresh clone. A missing path that git
 * ignores (generated: the Python client's stubs, dist/) is not a problem.
 */
import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { checkDocs } from "./check-docs-core.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
/** Recorded as it was at each stop: its paths name the tree of that time. */
const HISTORICAL = ["docs/performance-history.md"];

function git(args, input) {
  return execFileSync("git", args, { cwd: root, encoding: "utf8", maxBuffer: 64 * 1024 * 1024, ...(input !== undefined ? { input } : {}) });
}

/** Every repository file, relative and with forward slashes. */
function repoFiles() {
  try {
    return git(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
      .split("\0")
      .filter((f) => f !== "" && existsSync(join(root, f)));
  } catch {
    // Not a git checkout: every file on disk but dependencies and build output.
    const out = [];
    const walk = (dir) => {
      for (const name of readdirSync(dir)) {
        if (name === "node_modules" || name === ".git" || name === "dist") continue;
        const p = join(dir, name);
        if (statSync(p).isDirectory()) walk(p);
        else out.push(relative(root, p).split("\\").join("/"));
      }
    };
    walk(root);
    return out;
  }
}

/** The paths among `paths` that git ignores (generated files), or none when git cannot say. */
function ignored(paths) {
  if (paths.length === 0) return new Set();
  try {
    return new Set(
      git(["check-ignore", "--no-index", "--stdin"], `${paths.join("\n")}\n`)
        .split("\n")
        .filter(Boolean),
    );
  } catch (err) {
    // Exit status 1: none of them is ignored.
    return new Set(typeof err?.stdout === "string" ? err.stdout.split("\n").filter(Boolean) : []);
  }
}

const files = repoFiles();
const texts = new Map();
const read = (path) => {
  if (!texts.has(path)) {
    try {
      texts.set(path, readFileSync(join(root, path), "utf8"));
    } catch {
      texts.set(path, undefined);
    }
  }
  return texts.get(path);
};
const docs = files.filter((f) => f === "README.md" || (f.startsWith("docs/") && f.endsWith(".md"))).sort();
const modules = files.filter((f) => f.startsWith("src/") && !f.startsWith("src/gen/") && /\.(ts|mts|js|mjs)$/.test(f)).sort();

const found = checkDocs({ files, read, docs, modules, historical: HISTORICAL });
const generated = ignored([...new Set(found.filter((p) => p.missing !== undefined && !/[*<]/.test(p.missing)).map((p) => p.missing))]);
const problems = found.filter((p) => p.missing === undefined || !generated.has(p.missing));

if (problems.length > 0) {
  for (const p of problems) process.stderr.write(`${p.file}:${p.line}: ${p.message}\n`);
  process.stderr.write(
    `check-docs: ${problems.length} problem${problems.length === 1 ? "" : "s"} in ${docs.length} pages and ${modules.length} module headers\n`,
  );
  process.exit(1);
}
process.stdout.write(`check-docs: ${docs.length} pages and ${modules.length} module headers name only what exists\n`);

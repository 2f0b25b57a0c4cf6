/**
 * The build's bundles (scripts/bundle.mjs, src/shared/bundle-runner.ts): `npm run build`,
 * which the test command runs first, leaves in dist/bundle/ the CLI's and the worker's
 * bundles with their code caches, named by the build ids the bundles end with, and the
 * guest preludes' bytecode. A start runs from the bundles with the caches; a stale bundle
 * (tsc ran after it) or CODEMODE_BUNDLE=0 runs the modules instead, with the same results;
 * and workers run the build's prelude bytecode exactly when it was built for their
 * quickjs.wasm, else what they compile themselves. The ready line waits for code mode's
 * prelude on every thread; the other surfaces are warmed a second later, and a failure
 * there is logged without stopping code mode.
 */
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, describe, expect, it } from "vitest";
import { BUILD_MARK } from "../../src/shared/bundle-runner.js";
import { compileScript } from "../../src/sandbox/worker/compiler.js";
import { preludeKey, type PrecompiledFile } from "../../src/sandbox/worker/precompiled-preludes.js";
import { PRELUDES, type PreludeName } from "../../src/sandbox/surfaces/preludes.js";
import { copyPackage as copyPackageFrom, execute, logged, startStack } from "../helpers/harness.js";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const BUNDLE = join(ROOT, "dist", "bundle");
const copies: string[] = [];

afterAll(() => {
  for (const dir of copies) rmSync(dir, { recursive: true, force: true });
});

/** A copy of the package with dist's timestamps kept, removed after the tests. */
function copyPackage(): string {
  const dir = copyPackageFrom("codemode-bundle-", { keepTimes: true });
  copies.push(dir);
  return dir;
}

function buildId(name: string, dir = BUNDLE): string {
  const text = readFileSync(join(dir, `${name}.cjs`), "utf8");
  const at = text.lastIndexOf(BUILD_MARK);
  expect(at).toBeGreaterThan(0);
  return text.slice(at + BUILD_MARK.length).trim();
}

/** Starts `codemode start` (from `bin`, with `env`); returns its "started" log fields and what `code` returned. */
async function startAndRun(code: string, bin?: string, env: Record<string, string> = {}) {
  const stack = await startStack(["--threads", "1"], { ...(bin ? { bin } : {}), env });
  try {
    const started = JSON.parse(await logged(stack.proc, /"msg":"started"/)) as { bundle: string; codeCache: string; startupMs: number };
    const { model } = await execute(stack, { code });
    return { started, model };
  } finally {
    expect(await stack.stop()).toBe(0);
  }
}

describe("the build's bundles", () => {
  it("holds both bundles with the code caches of their build ids, and no cache of another build", () => {
    const ids = { codemode: buildId("codemode"), worker: buildId("worker") };
    for (const id of Object.values(ids)) expect(id).toMatch(/^[0-9a-f]{24}$/);
    for (const [name, id] of Object.entries(ids)) expect(existsSync(join(BUNDLE, `${name}.${id}.v8cache`)), name).toBe(true);
    // Besides the build's own, only caches a process wrote for its V8 flags (`<name>.<id>.<flavour>.v8cache`).
    for (const f of readdirSync(BUNDLE).filter((n) => n.endsWith(".v8cache")))
      expect(f).toMatch(new RegExp(`^(codemode\\.${ids.codemode}|worker\\.${ids.worker})(\\.[0-9a-f]{16})?\\.v8cache$`));
    expect(existsSync(join(BUNDLE, "worker-entry.cjs"))).toBe(true);
  });

  it("holds the preludes' bytecode for this quickjs.wasm, byte for byte what QuickJS compiles from their sources", async () => {
    const bytes = readFileSync(fileURLToPath(import.meta.resolve("quickjs-wasi/quickjs.wasm")));
    const file = JSON.parse(readFileSync(join(BUNDLE, "preludes.json"), "utf8")) as PrecompiledFile;
    expect(file.key).toBe(preludeKey(createHash("sha256").update(bytes).digest("hex")));
    const wasm = await WebAssembly.compile(bytes);
    for (const [name, p] of Object.entries(PRELUDES)) {
      const compiled = await compileScript(wasm, p.source, p.filename, p.flags);
      if (!compiled.ok) throw new Error(`${name}: ${compiled.error.message}`);
      expect(Buffer.from(file.bytecode[name as PreludeName], "base64").equals(Buffer.from(compiled.bytecode)), name).toBe(true);
    }
  });
});

describe("starting", () => {
  it("runs from the bundle with its code cache", async () => {
    const { started, model } = await startAndRun("return typeof ALL_TOOLS + ' ' + (1 + 1)");
    expect([started.bundle, started.codeCache]).toEqual(["used", "used"]);
    expect(model).toMatchObject({ status: "completed", value: "object 2" });
  });

  it("runs the modules when the bundle is older than them, or with CODEMODE_BUNDLE=0, with the same result", async () => {
    const dir = copyPackage();
    const main = join(dir, "dist", "cli", "main.js");
    const later = new Date(Date.now() + 60_000);
    utimesSync(main, later, later);
    const stale = await startAndRun("return typeof ALL_TOOLS + ' ' + (1 + 1)", join(dir, "bin", "codemode.js"));
    expect(stale.started).toMatchObject({ bundle: "stale", codeCache: "none" });
    expect(stale.model).toMatchObject({ status: "completed", value: "object 2" });
    const off = await startAndRun("return typeof ALL_TOOLS + ' ' + (1 + 1)", undefined, { CODEMODE_BUNDLE: "0" });
    expect(off.started).toMatchObject({ bundle: "off", codeCache: "none" });
    expect(off.model).toMatchObject({ status: "completed", value: "object 2" });
  });

  it("under other V8 flags the build's cache is refused; the process writes one for its flags, which the next start takes", async () => {
    const dir = copyPackage();
    const bin = join(dir, "bin", "codemode.js");
    const env = { NODE_OPTIONS: "--max-old-space-size=3000", CODEMODE_CODE_CACHE_REFRESH_MS: "300" };
    const first = await startStack(["--threads", "1"], { bin, env });
    let flavour: string;
    try {
      const started = JSON.parse(await logged(first.proc, /"msg":"started"/)) as { codeCache: string; nodeOptionsDigest: string };
      expect(started.codeCache).toBe("rejected");
      flavour = started.nodeOptionsDigest;
      expect(flavour).toMatch(/^[0-9a-f]{16}$/);
      await logged(first.proc, /wrote a code cache for this process's V8 flags/);
      expect((await execute(first, { code: "return 2 * 21" })).model).toMatchObject({ status: "completed", value: 42 });
    } finally {
      expect(await first.stop()).toBe(0);
    }
    const bundleDir = join(dir, "dist", "bundle");
    for (const name of ["codemode", "worker"]) expect(existsSync(join(bundleDir, `${name}.${buildId(name, bundleDir)}.${flavour}.v8cache`)), name).toBe(true);
    const again = await startAndRun("return 2 * 21", bin, env);
    expect(again.started).toMatchObject({ bundle: "used", codeCache: "used" });
    expect(again.model).toMatchObject({ status: "completed", value: 42 });
  });

  it("keeps the worker's cache through guests that fill their memory: a thread started after one takes it, and nothing rewrites it", async () => {
    // A worker that drops a large instance asks for a collection; the flag that allows it
    // was once set at that moment, which changed the process's V8 flags: every later thread
    // refused the build's cache and, a while later, wrote one for the changed flags over it.
    const dir = copyPackage();
    const bundleDir = join(dir, "dist", "bundle");
    const cache = join(bundleDir, `worker.${buildId("worker", bundleDir)}.v8cache`);
    const digest = () => createHash("sha256").update(readFileSync(cache)).digest("hex");
    const before = digest();
    const stack = await startStack(["--threads", "1"], { bin: join(dir, "bin", "codemode.js"), env: { CODEMODE_CODE_CACHE_REFRESH_MS: "200" } });
    try {
      expect(JSON.parse(await logged(stack.proc, /"msg":"started"/))).toMatchObject({ bundle: "used", codeCache: "used" });
      const filled = await execute(stack, { code: "const keep = [];\nfor (;;) keep.push(new Array(100000).fill(keep.length));", config: { timeoutMs: 5_000 } });
      expect(filled.model.status).toBe("failed");
      // A program of almost 1 MiB: compiling it grows the compiler's instance, which is dropped.
      const large = await execute(stack, { code: `return ${JSON.stringify("q".repeat(1_000_000))}.length` });
      expect(large.model).toMatchObject({ status: "completed", value: 1_000_000 });
      // A native loop past its deadline: the thread is killed and a new one started.
      const killed = await execute(stack, { code: 'new Array(2 ** 32 - 1).join("")', config: { timeoutMs: 200 } });
      expect(killed.model).toMatchObject({ status: "failed", code: "timeout" });
      await logged(stack.proc, /new worker thread warmed/);
      await new Promise((r) => setTimeout(r, 1_000)); // five refresh delays
      expect((await execute(stack, { code: "return 6 * 7" })).model).toMatchObject({ status: "completed", value: 42 });
    } finally {
      expect(await stack.stop()).toBe(0);
    }
    expect(digest()).toBe(before);
    expect(readdirSync(bundleDir).filter((n) => n.startsWith("worker.") && n.endsWith(".v8cache"))).toEqual([basename(cache)]);
  });

  it("runs the build's prelude bytecode only when its key is this quickjs.wasm's", async () => {
    // In a copy, code mode's bytecode is swapped for Tool Search's (which has no ALL_TOOLS):
    // with the right key the worker runs it; with another key it compiles code mode's own.
    const dir = copyPackage();
    const path = join(dir, "dist", "bundle", "preludes.json");
    const file = JSON.parse(readFileSync(path, "utf8")) as PrecompiledFile;
    writeFileSync(path, JSON.stringify({ ...file, bytecode: { ...file.bytecode, code: file.bytecode.tool_search } }));
    const bin = join(dir, "bin", "codemode.js");
    const swapped = await startAndRun("return typeof ALL_TOOLS", bin);
    expect(swapped.started.bundle).toBe("used");
    expect(swapped.model).toMatchObject({ status: "completed", value: "undefined" });
    writeFileSync(path, JSON.stringify({ key: "0".repeat(64), bytecode: { ...file.bytecode, code: file.bytecode.tool_search } }));
    const other = await startAndRun("return typeof ALL_TOOLS", bin);
    expect(other.model).toMatchObject({ status: "completed", value: "object" });
  });

  it("is ready once code mode runs on every thread; a surface warmed after the start that fails is logged, and code mode goes on", async () => {
    // codemode.run's bytecode swapped for code mode's: its probe, a second after the start, fails.
    const dir = copyPackage();
    const path = join(dir, "dist", "bundle", "preludes.json");
    const file = JSON.parse(readFileSync(path, "utf8")) as PrecompiledFile;
    writeFileSync(path, JSON.stringify({ ...file, bytecode: { ...file.bytecode, mcp_run: file.bytecode.code } }));
    const stack = await startStack(["--threads", "1"], { bin: join(dir, "bin", "codemode.js") });
    try {
      const failed = JSON.parse(await logged(stack.proc, /a surface's probe failed/)) as { surface: string; level: number };
      expect([failed.surface, failed.level]).toEqual(["mcp_run", 50]);
      expect((await execute(stack, { code: "return 6 * 7" })).model).toMatchObject({ status: "completed", value: 42 });
    } finally {
      expect(await stack.stop()).toBe(0);
    }
  });
});

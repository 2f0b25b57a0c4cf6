// Second half of `npm run build` (after tsc): bundles the main-thread CLI and the pool's
// worker from dist/ into dist/bundle/, and trains their V8 code caches. bin/codemode.js runs
// them through dist/shared/bundle-runner.js (the reasons, and when the modules are loaded
// instead, are there).
//
// 1. esbuild bundles, as CommonJS: dist/cli/main.js into codemode.cjs; the worker,
//    dist/sandbox/worker/worker.js, into worker.cjs; and worker-entry.cjs, the small file
//    piscina loads, which runs worker.cjs with its cache. Each file's `import.meta.url`,
//    `import.meta.resolve`, and in packages `__dirname` and `__filename`, are rewritten to
//    its original path, relative to the bundle, so worker files, .wasm and .proto files are
//    found where they are. Packages loaded only for optional features stay outside
//    (EXTERNAL); our modules' import() of them, or of a computed specifier, calls the
//    runner's own import() (vm.Script code cannot import without a flag).
// 2. codemode.cjs and worker.cjs end with `// codemode-build <id>`, the sha256 of their text.
//    preludes.json holds the guest preludes' bytecode for this quickjs.wasm.
// 3. Training: `codemode start --threads 1` from the new bundles with
//    CODEMODE_CODE_CACHE_TRAINING=1 runs OpenRun, an Exec whose program calls a tool
//    (answered with BridgeCallback) and the same over ExecSession, then waits for the
//    sidecar's background load of codemode.run's modules. The worker writes its
//    cache after each task; at SIGTERM the service drains and writes the CLI's cache as it
//    exits. A start or exec that fails fails the build.
import { spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { once } from "node:events";
import { mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, relative } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { parse } from "acorn";
import { build } from "esbuild";

const root = fileURLToPath(new URL("..", import.meta.url));
const dist = join(root, "dist");
const { BUNDLE_DIR, BUILD_MARK, bundleFile, cacheFile, trainingFile } = await import(join(dist, "shared", "bundle-runner.js"));

/** Loaded only for optional features (MCP, tracing, metrics, a Redis store, a YAML tenants file): not on the start path. */
const EXTERNAL = ["@modelcontextprotocol/sdk", "@opentelemetry/*", "ioredis", "prom-client", "yaml"];

const isExternal = (specifier) =>
  EXTERNAL.some((e) => (e.endsWith("/*") ? specifier.startsWith(e.slice(0, -1)) : specifier === e || specifier.startsWith(`${e}/`)));

/**
 * Where `import(` starts in each dynamic import of `source` (an ES module) that stays a
 * dynamic import in the bundle: of an EXTERNAL package, or of a computed specifier. Found
 * with acorn, so strings and comments that mention `import(` are left alone.
 */
function dynamicImports(source) {
  const found = [];
  const walk = (node) => {
    if (!node || typeof node.type !== "string") return;
    if (node.type === "ImportExpression") {
      // A literal specifier esbuild bundles stays import(): esbuild turns it into a require of the bundled module.
      const literal = node.source.type === "Literal" && typeof node.source.value === "string" ? node.source.value : undefined;
      if (literal === undefined || isExternal(literal)) found.push(node.start);
    }
    for (const value of Object.values(node)) {
      if (Array.isArray(value)) value.forEach(walk);
      else if (value && typeof value === "object") walk(value);
    }
  };
  walk(parse(source, { ecmaVersion: "latest", sourceType: "module" }));
  return found;
}

/**
 * Rewrites a file's own location references to its path relative to the bundle, through
 * helpers the banner defines with the bundle's own `require` (a module may shadow
 * `require`). In bundles run by bundle-runner (`viaRunner`), our modules' `import(...)`
 * becomes `__cmImport(...)`, the runner's own import().
 */
const locations = (viaRunner) => ({
  name: "original-locations",
  setup(b) {
    b.onLoad({ filter: /\.(c|m)?js$/ }, (args) => {
      const source = readFileSync(args.path, "utf8");
      const ours = !args.path.includes("/node_modules/");
      const imports = viaRunner && ours && source.includes("import(") ? dynamicImports(source) : [];
      if (!/import\.meta|__dirname|__filename/.test(source) && imports.length === 0) return undefined;
      let contents = source;
      for (const at of imports.reverse()) contents = `${contents.slice(0, at)}__cmImport${contents.slice(at + "import".length)}`;
      const rel = (p) => JSON.stringify(relative(BUNDLE_DIR, p));
      contents = contents.replace(/\bimport\.meta\.url\b/g, `__cmUrl(${rel(args.path)})`).replace(/\bimport\.meta\.resolve\(/g, "__cmResolve(");
      // Only packages' CommonJS files have __dirname/__filename (our modules are ESM, where they do not exist).
      if (!ours)
        contents = contents.replace(/\b__dirname\b/g, `__cmPath(${rel(dirname(args.path))})`).replace(/\b__filename\b/g, `__cmPath(${rel(args.path)})`);
      return { contents, loader: "js", resolveDir: dirname(args.path) };
    });
  },
});
const BANNER = [
  `"use strict";`,
  `const __cmRequire = require, __cmRoot = __dirname;`,
  `const __cmPath = (p) => __cmRequire("node:path").join(__cmRoot, p);`,
  `const __cmUrl = (p) => __cmRequire("node:url").pathToFileURL(__cmPath(p)).href;`,
  `const __cmResolve = (s) => __cmRequire("node:url").pathToFileURL(__cmRequire.resolve(s)).href;`,
].join("\n");

/** Bundles `entry` (relative to dist/) as bundle `name`; with `mark` (a bundle bundle-runner runs), ends it with its build id, which it returns. */
async function bundle(name, entry, mark) {
  const result = await build({
    entryPoints: [join(dist, entry)],
    outfile: bundleFile(name),
    bundle: true,
    platform: "node",
    format: "cjs",
    target: "node20",
    external: EXTERNAL,
    plugins: [locations(mark)],
    banner: { js: BANNER },
    write: false,
    // Without comments and indentation: a third less text to read and keep (V8 holds a script's
    // source for as long as it runs). Names stay, so stack traces still name their functions
    // (CODEMODE_BUNDLE=0 runs the modules, for traces with lines).
    minifyWhitespace: true,
    legalComments: "none",
    logLevel: "warning",
  });
  const text = result.outputFiles[0].text;
  if (!mark) return writeFileSync(bundleFile(name), text);
  const id = createHash("sha256").update(text).digest("hex").slice(0, 24);
  writeFileSync(bundleFile(name), `${text}${BUILD_MARK}${id}\n`);
  return id;
}

const started = performance.now();
rmSync(BUNDLE_DIR, { recursive: true, force: true });
mkdirSync(BUNDLE_DIR, { recursive: true });
const ids = { codemode: await bundle("codemode", "cli/main.js", true), worker: await bundle("worker", "sandbox/worker/worker.js", true) };
await bundle("worker-entry", "sandbox/worker/bundle-entry.js", false);
await precompilePreludes();
const bundled = performance.now();

await train();
for (const [name, id] of Object.entries(ids)) renameSync(trainingFile(name, id), cacheFile(name, id));
const kib = (p) => `${(statSync(p).size / 1024).toFixed(0)} KiB`;
const show = (name) => `${name}.cjs ${kib(bundleFile(name))}, cache ${kib(cacheFile(name, ids[name]))}`;
console.log(
  `${relative(root, BUNDLE_DIR)}: ${show("codemode")}; ${show("worker")} (bundled in ${(bundled - started).toFixed(0)} ms, trained in ${(performance.now() - bundled).toFixed(0)} ms)`,
);

/** Compiles the guest preludes into dist/bundle/preludes.json for this quickjs.wasm (dist/sandbox/worker/precompiled-preludes.js). */
async function precompilePreludes() {
  const { PRECOMPILED_FILE, preludeKey } = await import(join(dist, "sandbox", "worker", "precompiled-preludes.js"));
  const { PRELUDES } = await import(join(dist, "sandbox", "surfaces", "preludes.js"));
  const { compileScript } = await import(join(dist, "sandbox", "worker", "compiler.js"));
  const bytes = readFileSync(fileURLToPath(import.meta.resolve("quickjs-wasi/quickjs.wasm")));
  const wasm = await WebAssembly.compile(bytes);
  const bytecode = {};
  for (const [name, p] of Object.entries(PRELUDES)) {
    const compiled = await compileScript(wasm, p.source, p.filename, p.flags);
    if (!compiled.ok) throw new Error(`${p.what} does not compile: ${compiled.error.message} (line ${compiled.error.line})`);
    bytecode[name] = Buffer.from(compiled.bytecode).toString("base64");
  }
  writeFileSync(PRECOMPILED_FILE, JSON.stringify({ key: preludeKey(createHash("sha256").update(bytes).digest("hex")), bytecode }));
}

/** Starts the service from the bundles, runs the training execs, stops it; the caches land at their training files. */
async function train() {
  const { createClient } = await import(join(dist, "protocol", "grpc-client.js"));
  const { Sandbox } = await import(join(dist, "gen", "codemode", "sandbox", "v1", "sandbox_pb.js"));
  const { Control } = await import(join(dist, "gen", "codemode", "orchestrator", "v1", "control_pb.js"));
  const child = spawn(
    process.execPath,
    [join(root, "bin", "codemode.js"), "start", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", "127.0.0.1:0", "--threads", "1"],
    {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, CODEMODE_CODE_CACHE_TRAINING: "1", CODEMODE_BUNDLE: "1", CODEMODE_LOG_LEVEL: "warn" },
    },
  );
  const stderr = [];
  createInterface({ input: child.stderr }).on("line", (l) => stderr.push(l));
  const exited = once(child, "exit");
  const fail = (why) => {
    child.kill("SIGKILL");
    throw new Error(`code cache training failed: ${why}\n${stderr.join("\n")}`);
  };
  const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
  let ready;
  for await (const line of createInterface({ input: child.stdout })) {
    if (line.startsWith("ready ")) {
      ready = Object.fromEntries(
        line
          .slice(6)
          .split(" ")
          .map((kv) => kv.split("=")),
      );
      break;
    }
  }
  if (!ready) fail("no ready line");
  const sandbox = createClient(Sandbox, ready.sandbox);
  const control = createClient(Control, ready.orchestrator);
  try {
    const scope = { agentId: "build", sessionId: "build-session", sessionKey: "build-key", agentRunId: "build-run" };
    const echo = { name: "echo", description: "Returns its input.", parametersJson: '{"type":"object"}', source: 1, sourceName: "core", origin: 1 };
    await control.openRun({ scope, catalog: { case: "tools", value: { tools: [echo] } } });
    const program = "const r = await tools.echo({ n: 1 }); return r.n + 1";
    let value;
    for await (const ev of sandbox.exec({ scope, code: program })) {
      if (ev.event.case === "toolCall")
        await sandbox.bridgeCallback({ scope, callId: ev.event.value.callId, outcome: { case: "resultJson", value: ev.event.value.inputJson } });
      if (ev.event.case === "result") value = ev.event.value.valueJson;
    }
    if (value !== "2") fail(`the exec returned ${value}`);
    const session = sandbox.execSession();
    session.send({ message: { case: "exec", value: { scope, code: program } } });
    value = undefined;
    for await (const ev of session.messages) {
      if (ev.event.case === "toolCall")
        session.send({
          message: { case: "answer", value: { callId: ev.event.value.callId, outcome: { case: "resultJson", value: ev.event.value.inputJson } } },
        });
      if (ev.event.case === "result") {
        value = ev.event.value.valueJson;
        session.end();
      }
    }
    if (value !== "2") fail(`the ExecSession exec returned ${value}`);
    await control.closeRun({ scope });
    // The sidecar loads codemode.run's modules 1 s after start (src/sandbox/server.ts): in the cache too.
    await new Promise((r) => setTimeout(r, 1_200));
  } finally {
    sandbox.close();
    control.close();
  }
  child.kill("SIGTERM");
  const [code] = await exited;
  clearTimeout(timer);
  if (code !== 0) fail(`the service exited ${code}`);
}

// Suspend and resume, measured on the real product (codemode start, real gRPC), next to
// a plain exec in the same run: what exec → waiting costs (snapshot, encode, seal,
// store), what wait → completed costs (claim, check, restore, run), and how many bytes a
// stored snapshot takes, next to the raw VM memory and that memory merely compressed.
// Prints figures; asserts nothing. Usage: node bench/suspend-resume.bench.mjs [--n 100]
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { readFileSync } from "node:fs";
import { brotliCompressSync, constants as zlib } from "node:zlib";
import { parseArgs } from "node:util";
import { QuickJS } from "quickjs-wasi";
import { createClient } from "../dist/protocol/grpc-client.js";
import { Sandbox } from "../dist/gen/codemode/sandbox/v1/sandbox_pb.js";
import { Control } from "../dist/gen/codemode/orchestrator/v1/control_pb.js";

const { values } = parseArgs({ options: { n: { type: "string", default: "100" } } });
const N = Number(values.n);

const pct = (xs, p) => xs.slice().sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const fmt = (x) => x.toFixed(2).padStart(9);
const rows = [];

const proc = spawn(
  process.execPath,
  ["bin/codemode.js", "start", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", "127.0.0.1:0", "--max-suspended-runs", "1000"],
  {
    stdio: ["ignore", "pipe", "ignore"],
    env: { ...process.env, CODEMODE_LOG_LEVEL: "warn" },
  },
);
const ready = await new Promise((resolve) => createInterface({ input: proc.stdout }).on("line", (l) => l.startsWith("ready ") && resolve(l)));
const sandbox = createClient(Sandbox, /sandbox=(\S+)/.exec(ready)[1]);
const control = createClient(Control, /orchestrator=(\S+)/.exec(ready)[1]);
const scope = { agentId: "bench", sessionId: "s", sessionKey: "k", agentRunId: "bench-run" };
await control.openRun({ scope, catalog: { case: "tools", value: { tools: [{ name: "echo", description: "echo input", parametersJson: "{}" }] } } });

async function follow(stream) {
  for await (const ev of stream) {
    if (ev.event.case === "toolCall")
      void sandbox.bridgeCallback({ scope, callId: ev.event.value.callId, outcome: { case: "resultJson", value: ev.event.value.inputJson } });
    if (ev.event.case === "result") return JSON.parse(ev.event.value.modelJson);
  }
  throw new Error("no result");
}
const exec = (code) => follow(sandbox.exec({ scope, code }));
const wait = (runId) => follow(sandbox.wait({ scope, codeModeRunId: runId }));

async function measure(name, fn, extra = () => "") {
  for (let i = 0; i < Math.min(10, N); i++) await fn();
  const samples = [];
  const t0 = performance.now();
  for (let i = 0; i < N; i++) {
    const t = performance.now();
    await fn();
    samples.push(performance.now() - t);
  }
  const wall = performance.now() - t0;
  rows.push(`${name.padEnd(46)} ${fmt(pct(samples, 50))} ${fmt(pct(samples, 99))} ${(N / (wall / 1000)).toFixed(0).padStart(8)}/s  ${extra()}`);
  return samples;
}
const rss = () => `RSS ${(Number(readFileSync(`/proc/${proc.pid}/status`, "utf8").match(/VmRSS:\s+(\d+)/)[1]) / 1024).toFixed(0)} MB`;
const expect = (model, status) => {
  if (model.status !== status) throw new Error(`expected ${status}: ${JSON.stringify(model)}`);
  return model;
};

// A trivial program, and one holding ~100 KB of live data across the suspension.
const TRIVIAL = `await yield_control(); return 1 + 1;`;
const HEAVY = `const rows = Array.from({ length: 2000 }, (_, i) => ({ id: i, name: "row " + i, tags: ["a", "b"] })); await yield_control(); return rows.length;`;

await measure("baseline: exec return 1+1 (no suspension)", async () => expect(await exec("return 1 + 1"), "completed"), rss);
await measure("baseline: exec with 1 nested tool call", async () => expect(await exec("return await tools.echo({ a: 1 })"), "completed"), rss);
const sizes = { trivial: [], heavy: [] };
await measure(
  "exec → waiting (yield; snapshot+seal+store)",
  async () => sizes.trivial.push(expect(await exec(TRIVIAL), "waiting").telemetry.snapshotBytes),
  rss,
);
// Suspended runs to resume, made outside the timed loop.
const pendingRuns = [];
for (let i = 0; i < N + 10; i++) pendingRuns.push(expect(await exec(TRIVIAL), "waiting").runId);
await measure("wait → completed (claim+restore+run)", async () => expect(await wait(pendingRuns.pop()), "completed"), rss);
await measure("exec → waiting → wait → completed", async () => expect(await wait(expect(await exec(TRIVIAL), "waiting").runId), "completed"), rss);
await measure(
  "same, with ~100 KB of live guest data",
  async () => {
    const w = expect(await exec(HEAVY), "waiting");
    sizes.heavy.push(w.telemetry.snapshotBytes);
    expect(await wait(w.runId), "completed");
  },
  rss,
);

// The same two programs' raw VM memory, in process: what the delta encoding saves.
const wasm = await WebAssembly.compile(readFileSync(new URL(import.meta.resolve("quickjs-wasi/quickjs.wasm"))));
async function rawMemory(setup) {
  const vm = await QuickJS.create({ wasm });
  vm.evalCode(setup).dispose();
  const mem = vm.snapshot().memory;
  vm.dispose();
  return { raw: mem.byteLength, brotli: brotliCompressSync(mem, { params: { [zlib.BROTLI_PARAM_QUALITY]: 5 } }).byteLength };
}
const rawTrivial = await rawMemory(`globalThis.p = new Promise(() => {});`);
const rawHeavy = await rawMemory(`globalThis.rows = Array.from({ length: 2000 }, (_, i) => ({ id: i, name: "row " + i, tags: ["a", "b"] }));`);

console.log(`suspend/resume latency (ms), N=${N}, node ${process.version}, ${(await import("node:os")).cpus().length} cores`);
console.log(`${"case".padEnd(46)} ${"p50".padStart(9)} ${"p99".padStart(9)} ${"throughput".padStart(10)}`);
for (const r of rows) console.log(r);
console.log("");
console.log("stored snapshot bytes (sealed delta+brotli) vs the raw VM memory and that memory brotli-compressed");
console.log(`${"program".padEnd(28)} ${"stored p50".padStart(11)} ${"raw memory".padStart(11)} ${"raw brotli".padStart(11)}`);
console.log(
  `${"trivial (yield, return 1+1)".padEnd(28)} ${String(pct(sizes.trivial, 50)).padStart(11)} ${String(rawTrivial.raw).padStart(11)} ${String(rawTrivial.brotli).padStart(11)}`,
);
console.log(
  `${"~100 KB live data".padEnd(28)} ${String(pct(sizes.heavy, 50)).padStart(11)} ${String(rawHeavy.raw).padStart(11)} ${String(rawHeavy.brotli).padStart(11)}`,
);
sandbox.close();
control.close();
proc.kill("SIGTERM");

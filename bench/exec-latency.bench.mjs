// Exec latency and throughput of the real product (codemode start, real gRPC), next to
// two baselines in the same run: a fresh Node subprocess per program (how a Node-based
// tool-search bridge isolates code) and the raw in-process floor (QuickJS create + eval).
// Prints figures; asserts nothing. Usage: node bench/exec-latency.bench.mjs [--n 200]
import { spawn, spawnSync } from "node:child_process";
import { createInterface } from "node:readline";
import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { QuickJS } from "quickjs-wasi";
import { createClient } from "../dist/protocol/grpc-service.js";
import { Sandbox } from "../dist/gen/codemode/sandbox/v1/sandbox_pb.js";
import { Control } from "../dist/gen/codemode/orchestrator/v1/control_pb.js";

const { values } = parseArgs({ options: { n: { type: "string", default: "200" } } });
const N = Number(values.n);

const pct = (xs, p) => xs.slice().sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const fmt = (x) => x.toFixed(2).padStart(9);
const rows = [];
function report(name, samples, wallMs, extra = "") {
  rows.push(`${name.padEnd(44)} ${fmt(pct(samples, 50))} ${fmt(pct(samples, 99))} ${(samples.length / (wallMs / 1000)).toFixed(0).padStart(8)}/s  ${extra}`);
}

const proc = spawn(process.execPath, ["bin/codemode.js", "start", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", "127.0.0.1:0"], { stdio: ["ignore", "pipe", "ignore"], env: { ...process.env, CODEMODE_LOG_LEVEL: "warn" } });
const ready = await new Promise((resolve) => createInterface({ input: proc.stdout }).on("line", (l) => l.startsWith("ready ") && resolve(l)));
const sandboxAt = /sandbox=(\S+)/.exec(ready)[1];
const orchestratorAt = /orchestrator=(\S+)/.exec(ready)[1];
const sandbox = createClient(Sandbox, sandboxAt);
const control = createClient(Control, orchestratorAt);
const scope = { agentId: "bench", sessionId: "s", sessionKey: "k", agentRunId: "bench-run" };
await control.openRun({ scope, catalog: { case: "tools", value: { tools: [{ name: "echo", description: "echo input", parametersJson: "{}" }] } } });

async function exec(code) {
  let result;
  for await (const ev of sandbox.exec({ scope, code })) {
    if (ev.event.case === "toolCall") void sandbox.bridgeCallback({ scope, callId: ev.event.value.callId, outcome: { case: "resultJson", value: ev.event.value.inputJson } });
    if (ev.event.case === "result") result = ev.event.value;
  }
  if (result.status !== 1) throw new Error(result.modelJson);
}

async function measure(name, fn, n, concurrency = 1, extra) {
  for (let i = 0; i < Math.min(20, n); i++) await fn();
  const samples = [];
  const t0 = performance.now();
  let next = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (next++ < n) {
      const t = performance.now();
      await fn();
      samples.push(performance.now() - t);
    }
  }));
  report(name, samples, performance.now() - t0, extra ? extra() : "");
}

const rss = () => `sidecar RSS ${(Number(readFileSync(`/proc/${proc.pid}/status`, "utf8").match(/VmRSS:\s+(\d+)/)[1]) / 1024).toFixed(0)} MB`;

await measure("codemode exec: return 1+1", () => exec("return 1 + 1"), N, 1, rss);
await measure("codemode exec: 1 nested tool call", () => exec("return await tools.echo({ a: 1 })"), N, 1, rss);
await measure("codemode exec: 10 sequential tool calls", () => exec("let s = 0; for (let i = 0; i < 10; i++) s += (await tools.echo({ i })).i; return s"), Math.max(20, N / 4), 1, rss);
await measure("codemode exec: return 1+1, 8 concurrent", () => exec("return 1 + 1"), N, 8, rss);

const wasm = await WebAssembly.compile(readFileSync(new URL(import.meta.resolve("quickjs-wasi/quickjs.wasm"))));
await measure("floor: in-process QuickJS create+eval+dispose", async () => {
  const vm = await QuickJS.create({ wasm });
  vm.evalCode("1 + 1").dispose();
  vm.dispose();
}, N);
await measure("baseline: fresh Node subprocess per program", async () => {
  spawnSync(process.execPath, ["-e", "process.stdout.write(String(1 + 1))"], { encoding: "utf8" });
}, Math.max(10, Math.floor(N / 10)));

console.log(`exec latency (ms), N=${N}, node ${process.version}, ${(await import("node:os")).cpus().length} cores`);
console.log(`${"case".padEnd(44)} ${"p50".padStart(9)} ${"p99".padStart(9)} ${"throughput".padStart(10)}`);
for (const r of rows) console.log(r);
sandbox.close();
control.close();
proc.kill("SIGTERM");

// How much of a nested call's time is the service's own, and how much is its shape: a grpc-js
// server on a main thread with the VM on a worker thread, called by a plain gateway in another
// process. Three sides in the same interleaved rounds, each through the same plain gateway
// (bench/lib/plain-gateway.mjs, a process of its own per server):
//
//   - the service: `codemode start` (bench/lib/service.mjs), as in exec-latency's plain rows;
//   - its shape's floor: bench/lib/shape-server.mjs, which is that shape and nothing else
//     (no run state, catalog, policy, limits, records or checks; one VM per thread kept
//     for every exec; protobuf-es serializers as a plain server writes them);
//   - the in-process floor of exec-latency (bench/lib/floor.mjs: a fresh VM per program,
//     the tools as a synchronous host function).
//
// With --inline, a fourth side: the shape's server with one VM on its main thread, beside the
// connection (bench/lib/shape-server.mjs --inline): no thread hop, and no isolation of a
// program from the server's other calls. It shows what the worker threads cost the shape.
//
// Prints p50, p99 and each side's p50 as a ratio to the in-process floor's, and the cost of
// one nested call (W2's p50 less W1's, over its 10 calls) on each side. Then the CPU each
// server spends per exec over ExecSession (--cpu-n execs of each workload on one side, then
// the other, read from /proc/<pid>/task/*/stat: its main thread, and all its threads).
// Asserts nothing.
//
// The gateway spreads its execs over 8 runs (bench/lib/plain-gateway.mjs, `spread`), as
// conversations do: back to back on one run, the service's fair queue counts that session
// heavy and runs it on a background lane at a lower OS priority (src/sandbox/pool/scheduler.ts),
// which the shape does not have. --one-run measures that path instead.
//
// Usage: node bench/shape-floor.bench.mjs [--n 100] [--warmup 20] [--cpu-n 1000] [--one-run] [--inline]
import { spawn } from "node:child_process";
import { readFileSync, readdirSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { startService, mallocSettings } from "./lib/service.mjs";
import { startPlainGateway } from "./lib/gateway-process.mjs";
import { loadWasm, runFloor } from "./lib/floor.mjs";
import { EXPECT, W1, W2, W3 } from "./lib/workloads.mjs";
import { interleave, ms, printTable } from "./lib/stats.mjs";

const { values } = parseArgs({
  options: {
    n: { type: "string", default: "100" },
    warmup: { type: "string", default: "20" },
    "cpu-n": { type: "string", default: "1000" },
    "one-run": { type: "boolean", default: false },
    inline: { type: "boolean", default: false },
  },
});
const N = Number(values.n);
const WARM = Number(values.warmup);
/** Which runs the gateway's execs go to (bench/lib/plain-gateway.mjs). */
const RUNS = values["one-run"] ? "small" : "spread";
const load0 = loadavg()[0];
const t0 = performance.now();
const progress = (what) => process.stderr.write(`[${((performance.now() - t0) / 1000).toFixed(0).padStart(3)} s] ${what}\n`);

/** Starts bench/lib/shape-server.mjs with `args`; resolves with its ready addresses and a stop(). */
async function startShape(args = []) {
  const child = spawn(process.execPath, [new URL("./lib/shape-server.mjs", import.meta.url).pathname, ...args], { stdio: ["ignore", "pipe", "inherit"] });
  const line = await new Promise((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`shape server exited ${code} before its ready line`)));
    createInterface({ input: child.stdout }).once("line", resolve);
  });
  const ready = Object.fromEntries(
    line
      .slice("ready ".length)
      .split(" ")
      .map((kv) => kv.split("=")),
  );
  return { ready, pid: child.pid, stop: () => child.kill("SIGTERM") };
}

progress("starting the service and its shape's floor");
const service = await startService();
const shape = await startShape();
const inline = values.inline ? await startShape(["--inline"]) : undefined;
const viaService = await startPlainGateway(service.ready);
const viaShape = await startPlainGateway(shape.ready);
const viaInline = inline ? await startPlainGateway(inline.ready) : undefined;
const wasm = await loadWasm();
const PROGRAMS = { W1, W2, W3 };
// Both servers and the floor warm up before the first timed round.
for (const w of ["W1", "W2", "W3"]) {
  for (const way of ["ExecSession", "BridgeCallback"]) {
    await viaService.run(w, way, 50, RUNS);
    await viaShape.run(w, way, 50, RUNS);
    await viaInline?.run(w, way, 50, RUNS);
  }
  for (let i = 0; i < 50; i++) await runFloor(wasm, PROGRAMS[w]);
}

const floorSample = async (w) => {
  const t = performance.now();
  const value = await runFloor(wasm, PROGRAMS[w]);
  if (value !== EXPECT[w]) throw new Error(`floor ${w}: expected ${EXPECT[w]}, got ${value}`);
  return performance.now() - t;
};
const rows = [];
const cells = {};
for (const w of ["W1", "W2", "W3"]) {
  for (const way of ["ExecSession", "BridgeCallback"]) {
    progress(`${w} ${way} x${N}`);
    const [floor, shapeCell, serviceCell, inlineCell] = await interleave(
      [
        ["floor", () => floorSample(w)],
        ["shape", () => viaShape.sample(w, way, RUNS)],
        ["service", () => viaService.sample(w, way, RUNS)],
        ...(viaInline ? [["inline", () => viaInline.sample(w, way, RUNS)]] : []),
      ],
      N,
      WARM,
    );
    cells[`${w} ${way}`] = { floor, shape: shapeCell, service: serviceCell, inline: inlineCell };
    const ratio = (c) => `${(c.p50 / floor.p50).toFixed(2)}x`;
    const cell = (c) => `${ms(c.p50)} / ${ms(c.p99)} (${ratio(c)})`;
    rows.push([
      `${w} ${way}`,
      `${ms(floor.p50)} / ${ms(floor.p99)}`,
      ...(inlineCell ? [cell(inlineCell)] : []),
      cell(shapeCell),
      cell(serviceCell),
      `${(serviceCell.p50 / shapeCell.p50).toFixed(2)}x`,
    ]);
    for (const c of [floor, inlineCell, shapeCell, serviceCell]) {
      if (c?.errors) rows.push([`  ${c.name} failed ${c.errors}x`, c.firstError.slice(0, 120), ...(inlineCell ? [""] : []), "", "", ""]);
    }
  }
}
// CPU per exec: user + system time of each thread (clock ticks, 100 a second), before and after.
const CPU_N = Number(values["cpu-n"]);
function cpuMs(pid) {
  const byThread = {};
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const fields = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8").split(") ")[1].split(" ");
    byThread[tid] = (Number(fields[11]) + Number(fields[12])) * 10;
  }
  return byThread;
}
const cpuRows = [];
for (const w of ["W1", "W2", "W3"]) {
  const row = [`${w} ExecSession`];
  for (const [gateway, pid] of [
    [viaShape, shape.pid],
    [viaService, service.child.pid],
  ]) {
    progress(`CPU per exec: ${w} x${CPU_N} on ${pid === shape.pid ? "the shape's floor" : "the service"}`);
    const before = cpuMs(pid);
    await gateway.run(w, "ExecSession", CPU_N, RUNS);
    const after = cpuMs(pid);
    let all = 0;
    for (const tid of Object.keys(after)) all += after[tid] - (before[tid] ?? 0);
    row.push(`${((after[String(pid)] - before[String(pid)]) / CPU_N).toFixed(2)} ms`, `${(all / CPU_N).toFixed(2)} ms`);
  }
  cpuRows.push(row);
}
await viaService.close();
await viaShape.close();
await viaInline?.close();
shape.stop();
inline?.stop();
const exit = await service.stop();

/** One nested call's cost on a side: W2's p50 less W1's, over W2's ten calls. */
const perCall = (way, side) => ((cells[`W2 ${way}`][side].p50 - cells[`W1 ${way}`][side].p50) / 10) * 1000;
console.log(
  `\n## A nested call: the service against its shape's floor (issue 34)\nnode ${process.version}, ${cpus().length} cores, load average ${load0.toFixed(2)} at start, ${loadavg()[0].toFixed(2)} at end; --n ${N} --warmup ${WARM}${values["one-run"] ? " --one-run" : ""}; service ${mallocSettings()}; ${((performance.now() - t0) / 1000).toFixed(0)} s in all; sidecar exited ${exit} on SIGTERM\n`,
);
printTable(
  [
    "workload, answered by",
    "in-process floor p50 / p99",
    ...(inline ? ["shape, VM on its main thread p50 / p99 (ratio)"] : []),
    "shape's floor p50 / p99 (ratio)",
    "service p50 / p99 (ratio)",
    "service / shape",
  ],
  rows,
);
console.log(`\nCPU per exec (${CPU_N} execs each, one side after the other):\n`);
printTable(["workload", "shape's floor: main thread", "shape's floor: all threads", "service: main thread", "service: all threads"], cpuRows);
console.log(`
One nested call (W2's p50 less W1's, over its 10 calls): in-process floor ${perCall("ExecSession", "floor").toFixed(0)} µs;${inline ? ` shape with its VM on the main thread ${perCall("ExecSession", "inline").toFixed(0)} µs over ExecSession and ${perCall("BridgeCallback", "inline").toFixed(0)} µs with BridgeCallback;` : ""} shape's floor ${perCall("ExecSession", "shape").toFixed(0)} µs over ExecSession and ${perCall("BridgeCallback", "shape").toFixed(0)} µs with BridgeCallback; service ${perCall("ExecSession", "service").toFixed(0)} µs and ${perCall("BridgeCallback", "service").toFixed(0)} µs.

Notes:
- Each side through its own plain gateway process (bench/lib/plain-gateway.mjs), its execs ${RUNS === "spread" ? "spread over 8 runs" : "all on one run (the service runs that session on a background lane)"}; ratios are to the in-process floor's p50 of the same rounds, as exec-latency's goals are.
- The shape's floor (bench/lib/shape-server.mjs) is a grpc-js server on the main thread and one QuickJS VM per worker thread (kept for every exec), with nothing of the service's work: what any service of this shape spends on this machine.`);

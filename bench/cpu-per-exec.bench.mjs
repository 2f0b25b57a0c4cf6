// CPU per exec, by process and by sidecar thread, next to the in-process floor's CPU per
// run, in the same run. Latency on this shared 2-core machine moves with its load; the CPU
// each thread spends per exec moves much less, and shows where an exec's cost is: the
// sidecar's main thread (gRPC, protobuf, the link, the pool), its worker threads (the VM),
// V8's helper threads (compilers, garbage collection), and the gateway process itself.
//
// For each workload: --warmup execs untimed (W5: at most as many as it times) (a fresh sidecar's V8 optimizes its hot paths on
// its helper threads over its first few thousand execs: 10000 measures it settled), then --n execs back to back at --concurrency over one
// stream each (Exec for W1, ExecSession for the tool-calling W2, W3 and W5), timing CPU
// from /proc/<pid>/task/*/stat (the sidecar) and process.cpuUsage() (this process, the
// gateway); the floor runs the same program in fresh in-process VMs (bench/lib/floor.mjs)
// and its CPU is this process's over those runs. Prints figures; asserts nothing.
//
// Usage: node bench/cpu-per-exec.bench.mjs [--n 1000] [--concurrency 1] [--warmup 300] [--only W1,W2,W3,W5]
import { readdirSync, readFileSync } from "node:fs";
import { cpus, loadavg } from "node:os";
import { parseArgs } from "node:util";
import { startService, Gateway, mallocSettings } from "./lib/service.mjs";
import { loadWasm, runFloor } from "./lib/floor.mjs";
import { W1, W2, W3, W5, EXPECT, TWO_TOOLS } from "./lib/workloads.mjs";

const { values } = parseArgs({
  options: {
    n: { type: "string", default: "1000" },
    concurrency: { type: "string", default: "1" },
    warmup: { type: "string", default: "300" },
    only: { type: "string", default: "W1,W2,W3,W5" },
  },
});
const N = Number(values.n);
const C = Number(values.concurrency);
const WARMUP = Number(values.warmup);
const WORKLOADS = { W1, W2, W3, W5 };
const chosen = values.only.split(",").filter((w) => w in WORKLOADS);
// Tool-calling workloads go over ExecSession (answers on the stream), as a gateway that can would.
const SESSION = new Set(["W2", "W3", "W5"]);
// clock ticks per second for /proc stat times (Linux's USER_HZ)
const HZ = 100;

/** CPU ms of each thread of `pid`, by thread id, with its name. */
function threadCpu(pid) {
  const out = new Map();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
      const name = /\((.*)\)/.exec(stat)[1];
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      out.set(tid, { name, ms: ((Number(f[11]) + Number(f[12])) * 1000) / HZ });
    } catch {
      // the thread ended meanwhile
    }
  }
  return out;
}

/** The sidecar's threads in groups: its main thread, its pool's workers (which name themselves codemode-worker or codemode-bg), and the rest (V8 and libuv helpers). */
function groups(pid, before, after) {
  const g = { main: 0, workers: 0, helpers: 0 };
  for (const [tid, a] of after) {
    const d = a.ms - (before.get(tid)?.ms ?? 0);
    if (tid === String(pid)) g.main += d;
    else if (a.name.startsWith("codemode-")) g.workers += d;
    else g.helpers += d;
  }
  return g;
}

const svc = await startService();
const gw = new Gateway(svc.ready);
// The warm-up moves to a new run every 2,000 execs and the timed stretch has a run of its own, so
// that each stays within a run's tool-call limit (100,000: W3 makes 16 calls an exec, so --n 6250 at most).
let scope;
const run = (name) => (SESSION.has(name) ? gw.execSession(scope, WORKLOADS[name], EXPECT[name]) : gw.exec(scope, WORKLOADS[name], EXPECT[name]));
const wasm = await loadWasm();
const load0 = loadavg()[0];

const rows = [];
for (const name of chosen) {
  const n = name === "W5" ? Math.max(20, Math.floor(N / 10)) : N;
  scope = await gw.openRun({ tools: TWO_TOOLS });
  for (let i = 0; i < (name === "W5" ? Math.min(WARMUP, n) : WARMUP); i++) {
    // a new run every 2,000 execs (W3 makes 16 calls an exec)
    if (i > 0 && i % 2000 === 0) scope = await gw.openRun({ tools: TWO_TOOLS });
    await run(name);
  }
  scope = await gw.openRun({ tools: TWO_TOOLS });
  const t0 = threadCpu(svc.child.pid);
  const self0 = process.cpuUsage();
  const w0 = performance.now();
  let left = n;
  await Promise.all(
    Array.from({ length: C }, async () => {
      while (left-- > 0) await run(name);
    }),
  );
  const wall = performance.now() - w0;
  const self = process.cpuUsage(self0);
  const t1 = threadCpu(svc.child.pid);
  const g = groups(svc.child.pid, t0, t1);
  // The floor: the same program in fresh VMs, this process's CPU over those runs.
  for (let i = 0; i < 50; i++) await runFloor(wasm, WORKLOADS[name]);
  const f0 = process.cpuUsage();
  const fn = Math.min(n, 300);
  for (let i = 0; i < fn; i++) await runFloor(wasm, WORKLOADS[name]);
  const f = process.cpuUsage(f0);
  const per = (ms, count) => ms / count;
  rows.push({
    name,
    n,
    runsPerS: (n / wall) * 1000,
    gateway: per((self.user + self.system) / 1000, n),
    main: per(g.main, n),
    workers: per(g.workers, n),
    helpers: per(g.helpers, n),
    floor: per((f.user + f.system) / 1000, fn),
  });
}
gw.close();
await svc.stop();

const ms = (x) => `${x.toFixed(3)} ms`;
console.log(
  `node ${process.version}, ${cpus().length} cores, load average ${load0.toFixed(2)} at start, ${loadavg()[0].toFixed(2)} at end; --n ${N} --concurrency ${C} --warmup ${WARMUP}; service ${mallocSettings()}\n`,
);
console.log(
  "| workload | execs | runs/s | sidecar main thread | sidecar workers | sidecar V8/libuv helpers | sidecar total | gateway (this process) | service total | floor (one fresh VM) | service / floor |",
);
console.log("|---|---|---|---|---|---|---|---|---|---|---|");
for (const r of rows) {
  const sidecar = r.main + r.workers + r.helpers;
  const total = sidecar + r.gateway;
  console.log(
    `| ${r.name}${SESSION.has(r.name) ? " (ExecSession)" : ""} | ${r.n} | ${r.runsPerS.toFixed(0)} | ${ms(r.main)} | ${ms(r.workers)} | ${ms(r.helpers)} | ${ms(sidecar)} | ${ms(r.gateway)} | ${ms(total)} | ${ms(r.floor)} | ${(total / r.floor).toFixed(2)}x |`,
  );
}
console.log(
  "\nCPU per exec, from /proc/<pid>/task/*/stat (10 ms ticks: figures below 0.01 ms per exec are noise) and process.cpuUsage(). Workers: the pool's threads (named codemode-worker, or codemode-bg on a background lane); helpers: the rest (V8 compiler and GC threads, libuv). The floor's CPU is this process's while it ran the program in fresh VMs, tools as host functions.",
);

// W1 throughput at a fixed concurrency, long enough to read: the service (`codemode start`,
// over real gRPC, one session per round) against the in-process floor (worker threads each
// creating, running and disposing W1 VMs back to back), alternating, in the same run. With
// --variant, the service is also started with other flags (e.g. `--threads 1`) in the same
// rotation, so a scheduling change can be told from the machine's drift. Each round starts a
// fresh sidecar, warms it with --warmup execs and times --n execs ("fresh"), then runs
// untimed execs until it has served --settle in all and times --n execs again ("settled").
// A fresh sidecar's V8 is still optimizing its hot paths on its helper threads for its first
// few thousand execs, which costs CPU the floor's threads (warm from the start, and kept
// across rounds) no longer pay; the settled rows compare like with like. Prints figures;
// asserts nothing.
//
// Usage: node bench/throughput.bench.mjs [--n 3000] [--concurrency 2] [--rounds 3]
//          [--warmup 600] [--settle 12000] [--variant="--threads 1"]...
//          (the = is needed: the value starts with a dash)
import { cpus, loadavg } from "node:os";
import { parseArgs } from "node:util";
import { Gateway, mallocSettings, startService } from "./lib/service.mjs";
import { EXPECT, TWO_TOOLS, W1 } from "./lib/workloads.mjs";
import { pct, printTable } from "./lib/stats.mjs";
import { startFloorThreads } from "./lib/floor-threads.mjs";

const { values } = parseArgs({
  options: {
    n: { type: "string", default: "3000" },
    concurrency: { type: "string", default: "2" },
    rounds: { type: "string", default: "3" },
    warmup: { type: "string", default: "600" },
    settle: { type: "string", default: "12000" },
    variant: { type: "string", multiple: true, default: [] },
  },
});
const N = Number(values.n);
const C = Number(values.concurrency);
const ROUNDS = Number(values.rounds);
const WARMUP = Number(values.warmup);
/** Execs a sidecar has served in all before its settled timing (0: no settled timing). */
const SETTLE = Number(values.settle);
const configs = [{ name: "service", args: [] }, ...values.variant.map((v) => ({ name: `service ${v}`, args: v.split(" ").filter(Boolean) }))];
const load0 = loadavg()[0];

/** `n` execs of W1 over `c` loops of `gw` on `scope`; runs/s and latencies. */
async function timed(gw, scope) {
  let next = 0;
  const lat = [];
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: C }, async () => {
      while (next++ < N) lat.push(await gw.exec(scope, W1, EXPECT.W1));
    }),
  );
  return { rate: N / ((performance.now() - t0) / 1000), lat };
}

/** A fresh sidecar started with `args`: timed after --warmup execs (fresh), then after --settle in all (settled). */
async function serviceRound(args) {
  const svc = await startService(args);
  try {
    const gw = new Gateway(svc.ready);
    const scope = await gw.openRun({ tools: TWO_TOOLS }, "throughput");
    for (let i = 0; i < WARMUP; i++) await gw.exec(scope, W1, EXPECT.W1);
    const fresh = await timed(gw, scope);
    let settled;
    if (SETTLE > 0) {
      for (let served = WARMUP + N; served < SETTLE; served++) await gw.exec(scope, W1, EXPECT.W1);
      settled = await timed(gw, scope);
    }
    gw.close();
    return { fresh, settled };
  } finally {
    await svc.stop();
  }
}

const floorThreads = await startFloorThreads(C);
/** `n` W1 VMs in all over the `c` floor threads; runs/s and latencies. */
async function floorRound() {
  const { samples, wallMs } = await floorThreads.run(Math.ceil(N / C));
  return { rate: samples.length / (wallMs / 1000), lat: samples };
}

const rows = new Map([...configs.flatMap((c) => [[`${c.name}, fresh`, []], ...(SETTLE > 0 ? [[`${c.name}, settled`, []]] : [])]), ["floor", []]]);
for (let round = 0; round < ROUNDS; round++) {
  for (const c of configs) {
    process.stderr.write(`[round ${round + 1}] ${c.name}\n`);
    const { fresh, settled } = await serviceRound(c.args);
    rows.get(`${c.name}, fresh`).push(fresh);
    if (settled) rows.get(`${c.name}, settled`).push(settled);
  }
  process.stderr.write(`[round ${round + 1}] floor\n`);
  rows.get("floor").push(await floorRound());
}
await floorThreads.close();

const floorRate = rows.get("floor").reduce((a, r) => a + r.rate, 0) / ROUNDS;
const table = [...rows].map(([name, rs]) => {
  const lat = rs.flatMap((r) => r.lat).sort((a, b) => a - b);
  const mean = rs.reduce((a, r) => a + r.rate, 0) / rs.length;
  return [
    name,
    rs.map((r) => r.rate.toFixed(0)).join(" / "),
    mean.toFixed(0),
    `${pct(lat, 50).toFixed(2)} ms`,
    `${pct(lat, 99).toFixed(2)} ms`,
    name === "floor" ? "–" : `${(mean / floorRate).toFixed(2)}x`,
  ];
});
console.log(
  `\n## W1 throughput at ${C} concurrent: node ${process.version}, ${cpus().length} cores, load average ${load0.toFixed(2)} at start, ${loadavg()[0].toFixed(2)} at end; --n ${N} --rounds ${ROUNDS} --warmup ${WARMUP} --settle ${SETTLE}; service ${mallocSettings()}\n`,
);
printTable(["", "runs/s per round", "mean runs/s", "p50", "p99", "mean / floor"], table);
console.log(
  `\n- Service: a fresh \`codemode start\` per round, ${WARMUP} execs of warm-up, then ${N} W1 execs over ${C} gateway loops in one session (fresh)${SETTLE > 0 ? `; then untimed execs until it served ${SETTLE} in all, and ${N} more timed (settled)` : ""}. This process is the gateway and shares the cores. Floor: ${C} worker threads in this process, each creating, running and disposing W1 VMs back to back (bench/lib/floor-worker.mjs). Rounds alternate in the order of the table.`,
);

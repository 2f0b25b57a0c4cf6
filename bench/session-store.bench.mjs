// The session store (code mode's store/load), measured on the real product (codemode start,
// real gRPC), beside a plain exec in the same run, rounds interleaved: what a cell's first
// load costs (one LoadSession on the link), each later load (answered on the sidecar), and a
// store (kept in the cell, committed once at its end: one CommitSession before the result).
// Prints figures; asserts nothing. Usage: node bench/session-store.bench.mjs [--n 200]
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { createClient } from "../dist/protocol/grpc-client.js";
import { Sandbox } from "../dist/gen/codemode/sandbox/v1/sandbox_pb.js";
import { Control } from "../dist/gen/codemode/orchestrator/v1/control_pb.js";
import { interleave, ms, printTable } from "./lib/stats.mjs";

const { values } = parseArgs({ options: { n: { type: "string", default: "200" }, store: { type: "string" } } });
const N = Number(values.n);

const proc = spawn(
  process.execPath,
  ["bin/codemode.js", "start", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", "127.0.0.1:0", ...(values.store ? ["--store", values.store] : [])],
  { stdio: ["ignore", "pipe", "ignore"], env: { ...process.env, CODEMODE_LOG_LEVEL: "warn" } },
);
const ready = await new Promise((resolve) => createInterface({ input: proc.stdout }).on("line", (l) => l.startsWith("ready ") && resolve(l)));
const sandbox = createClient(Sandbox, /sandbox=(\S+)/.exec(ready)[1]);
const control = createClient(Control, /orchestrator=(\S+)/.exec(ready)[1]);
const scope = { agentId: "bench", sessionId: "s", sessionKey: "k", agentRunId: "bench-run" };
await control.openRun({ scope, catalog: { case: "tools", value: { tools: [] } } });

/** Times one exec from the request to its Result event. */
async function timed(code) {
  const t = performance.now();
  for await (const ev of sandbox.exec({ scope, code })) {
    if (ev.event.case !== "result") continue;
    const elapsed = performance.now() - t;
    const model = JSON.parse(ev.event.value.modelJson);
    if (model.status !== "completed") throw new Error(JSON.stringify(model));
    return elapsed;
  }
  throw new Error("no result");
}

// A value a program would keep: a small plan with a few rows.
const VALUE = `{ plan: ["search", "describe", "call"], rows: Array.from({ length: 20 }, (_, i) => ({ id: i, ok: true })) }`;
await timed(`await store('plan', ${VALUE})`);
const cells = await interleave(
  [
    ["plain exec: return 1", () => timed("return 1")],
    ["exec: 1 load (the cell's first)", () => timed("return (await load('plan')).plan.length")],
    ["exec: 10 loads", () => timed("let n = 0; for (let i = 0; i < 10; i++) n += (await load('plan')).plan.length; return n")],
    ["exec: 1 store (committed at the end)", () => timed(`await store('plan', ${VALUE}); return 1`)],
    ["exec: 1 load, 1 store", () => timed(`const p = await load('plan'); await store('plan', p); return 1`)],
  ],
  N,
  10,
);
const base = cells[0].p50;
printTable(
  ["", "p50", "p99", "p50 over the plain exec"],
  cells.map((c) => [c.name, ms(c.p50), ms(c.p99), c === cells[0] ? "" : ms(c.p50 - base)]),
);
console.log(`\nA later load (each of loads 2–10): ${ms((cells[2].p50 - cells[1].p50) / 9)} p50. n=${N} rounds, store ${values.store ?? "memory"}.`);
for (const c of cells) if (c.errors) console.log(`${c.name}: ${c.errors} failed (${c.firstError})`);
sandbox.close();
control.close();
proc.kill("SIGTERM");

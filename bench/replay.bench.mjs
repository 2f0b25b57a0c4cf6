// Replay recording (recordForReplay, on by default) measured on the real product (codemode
// start, real gRPC), rounds interleaved: an exec and a 10-call exec (answered with BridgeCallback)
// in a run that records against one that does not, the record's size per segment, and
// how long Control.ReplayRun takes for each. Prints figures; asserts nothing.
// Usage: node bench/replay.bench.mjs [--n 200]
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { createClient } from "../dist/protocol/grpc-client.js";
import { Sandbox } from "../dist/gen/codemode/sandbox/v1/sandbox_pb.js";
import { Control } from "../dist/gen/codemode/orchestrator/v1/control_pb.js";
import { interleave, ms, printTable } from "./lib/stats.mjs";

const { values } = parseArgs({ options: { n: { type: "string", default: "200" } } });
const N = Number(values.n);

const proc = spawn(process.execPath, ["bin/codemode.js", "start", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", "127.0.0.1:0"], {
  stdio: ["ignore", "pipe", "ignore"],
  env: { ...process.env, CODEMODE_LOG_LEVEL: "warn" },
});
const ready = await new Promise((resolve) => createInterface({ input: proc.stdout }).on("line", (l) => l.startsWith("ready ") && resolve(l)));
const sandbox = createClient(Sandbox, /sandbox=(\S+)/.exec(ready)[1]);
const control = createClient(Control, /orchestrator=(\S+)/.exec(ready)[1]);
const tools = [{ name: "echo", description: "echo", inputSchemaJson: '{"type":"object"}', source: 1, sourceName: "core" }];
const scopes = {};
for (const record of [true, false]) {
  const scope = { agentId: "bench", sessionId: `s-${record}`, sessionKey: "k", agentRunId: `bench-${record}` };
  await control.openRun({ scope, catalog: { case: "tools", value: { tools } }, config: { recordForReplay: record, maxToolCallsPerRun: 100_000 } });
  scopes[record] = scope;
}

const W2 = "let n = 0; for (let i = 0; i < 10; i++) n += (await tools.echo({ i })).i; return n";

/** One exec, each nested call answered with BridgeCallback; resolves with ms and the run id. */
async function timed(record, code) {
  const scope = scopes[record];
  const t = performance.now();
  for await (const ev of sandbox.exec({ scope, code })) {
    const e = ev.event;
    if (e.case === "toolCall") void sandbox.bridgeCallback({ scope, callId: e.value.callId, outcome: { case: "resultJson", value: e.value.inputJson } });
    else if (e.case === "result") {
      const elapsed = performance.now() - t;
      const model = JSON.parse(e.value.modelJson);
      if (model.status !== "completed") throw new Error(JSON.stringify(model));
      return { elapsed, runId: e.value.codeModeRunId };
    }
  }
  throw new Error("no result");
}

const runIds = { w1: "", w2: "" };
const cell = (record, code, key) => async () => {
  const { elapsed, runId } = await timed(record, code);
  if (record) runIds[key] = runId;
  return elapsed;
};
await timed(true, W2);
const cells = await interleave(
  [
    ["W1 return 1+1, recordForReplay false", cell(false, "return 1+1", "w1")],
    ["W1 return 1+1, recorded", cell(true, "return 1+1", "w1")],
    ["W2 10 sequential calls, recordForReplay false", cell(false, W2, "w2")],
    ["W2 10 sequential calls, recorded", cell(true, W2, "w2")],
  ],
  N,
  10,
);
printTable(
  ["", "p50", "p99", "p50 over not recorded"],
  cells.map((c, i) => [c.name, ms(c.p50), ms(c.p99), i % 2 === 1 ? ms(c.p50 - cells[i - 1].p50) : ""]),
);
const rows = [];
for (const [name, key] of [
  ["W1", "w1"],
  ["W2", "w2"],
]) {
  const { recordJson } = await control.getReplayRecord({ scope: scopes[true], codeModeRunId: runIds[key] });
  const times = [];
  let verdict = "";
  for (let i = 0; i < 20; i++) {
    const t = performance.now();
    verdict = (await control.replayRun({ scope: scopes[true], codeModeRunId: runIds[key] })).verdict;
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  rows.push([name, `${recordJson.length} B`, ms(times[10]), verdict]);
}
console.log("");
printTable(["record of", "JSON size", "ReplayRun p50 (20 runs)", "verdict"], rows);
console.log(`\nn=${N} rounds; each call answered with BridgeCallback; codemode start, memory store.`);
for (const c of cells) if (c.errors) console.log(`${c.name}: ${c.errors} failed (${c.firstError})`);
sandbox.close();
control.close();
proc.kill("SIGTERM");

// awaitResults, measured on the real product (codemode start, real gRPC): how long after the
// gateway's answer a parked program's Result arrives when the exec stayed open
// (awaitResults: the sidecar resumes the stored run itself), beside the polling path a
// plain exec takes (it returned `waiting`; the gateway answers, then calls wait). Both
// programs park first (timeoutMs 100, the answer comes 150 ms after the call). Rounds
// interleaved. Prints figures; asserts nothing. Usage: node bench/await-results.bench.mjs [--n 100]
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { parseArgs } from "node:util";
import { createClient } from "../dist/protocol/grpc-client.js";
import { Sandbox } from "../dist/gen/codemode/sandbox/v1/sandbox_pb.js";
import { Control } from "../dist/gen/codemode/orchestrator/v1/control_pb.js";
import { interleave, ms, printTable } from "./lib/stats.mjs";

const { values } = parseArgs({ options: { n: { type: "string", default: "100" } } });
const N = Number(values.n);
const ANSWER_AFTER_MS = 150;

const proc = spawn(process.execPath, ["bin/codemode.js", "start", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", "127.0.0.1:0"], {
  stdio: ["ignore", "pipe", "ignore"],
  env: { ...process.env, CODEMODE_LOG_LEVEL: "warn" },
});
const ready = await new Promise((resolve) => createInterface({ input: proc.stdout }).on("line", (l) => l.startsWith("ready ") && resolve(l)));
const sandbox = createClient(Sandbox, /sandbox=(\S+)/.exec(ready)[1]);
const control = createClient(Control, /orchestrator=(\S+)/.exec(ready)[1]);
const scope = { agentId: "bench", sessionId: "s", sessionKey: "k", agentRunId: "bench-run" };
await control.openRun({
  scope,
  catalog: { case: "tools", value: { tools: [{ name: "slow", description: "answers later", parametersJson: "{}" }] } },
  config: { timeoutMs: 100 },
});
const CODE = "return await tools.slow({ n: 1 })";
const answer = (callId) => sandbox.bridgeCallback({ scope, callId, outcome: { case: "resultJson", value: "42" } });

/** awaitResults: one exec; the clock runs from the answer to its Result. */
async function awaited() {
  let answeredAt = 0;
  for await (const ev of sandbox.exec({ scope, code: CODE, awaitResults: true })) {
    if (ev.event.case === "toolCall") {
      const { callId } = ev.event.value;
      setTimeout(() => {
        answeredAt = performance.now();
        void answer(callId);
      }, ANSWER_AFTER_MS);
    }
    if (ev.event.case === "result") {
      if (JSON.parse(ev.event.value.modelJson).status !== "completed") throw new Error(ev.event.value.modelJson);
      return performance.now() - answeredAt;
    }
  }
  throw new Error("no result");
}

/** The polling path: the exec returns waiting; the clock runs from the answer to the wait's Result. */
async function polled() {
  let callId = "";
  let runId = "";
  for await (const ev of sandbox.exec({ scope, code: CODE })) {
    if (ev.event.case === "toolCall") callId = ev.event.value.callId;
    if (ev.event.case === "result") runId = ev.event.value.codeModeRunId;
  }
  await new Promise((r) => setTimeout(r, ANSWER_AFTER_MS - 100));
  const t = performance.now();
  await answer(callId);
  for await (const ev of sandbox.wait({ scope, codeModeRunId: runId })) {
    if (ev.event.case === "result") {
      if (JSON.parse(ev.event.value.modelJson).status !== "completed") throw new Error(ev.event.value.modelJson);
      return performance.now() - t;
    }
  }
  throw new Error("no result");
}

const cells = await interleave(
  [
    ["awaitResults: answer → Result (the sidecar resumes the run)", awaited],
    ["plain exec: answer, then wait → Result", polled],
  ],
  N,
  5,
);
printTable(
  ["", "p50", "p99"],
  cells.map((c) => [c.name, ms(c.p50), ms(c.p99)]),
);
console.log(`\nn=${N} rounds; the program parked at timeoutMs 100, the answer came ${ANSWER_AFTER_MS} ms after its call.`);
for (const c of cells) if (c.errors) console.log(`${c.name}: ${c.errors} failed (${c.firstError})`);
sandbox.close();
control.close();
proc.kill("SIGTERM");

// A plain gateway for bench/exec-latency.bench.mjs (issue 34): what a gateway team writes,
// in a process of its own. It imports only `@grpc/grpc-js`, `@bufbuild/protobuf` and the
// protoc-gen-es descriptors of proto/ (dist/gen/, the stubs a team generates), and builds its
// clients with `grpc.makeGenericClientConstructor`, `toBinary`/`fromBinary` serializers
// (./plain-definition.mjs) and the library's default channel options. Nothing else of src/ or dist/.
//
//   node bench/lib/plain-gateway.mjs SANDBOX_ADDRESS ORCHESTRATOR_ADDRESS
//
// It opens two runs (the two tools of bench/lib/workloads.mjs, and the 2,000 of
// bench/lib/catalog.mjs, which start with the same two), prints `ready`, then reads commands
// on stdin, one a line, and answers each with one JSON line on stdout:
//
//   run W2 ExecSession 200     -> {"samples":[ms, ...]}    (or {"error":"..."})
//   run W3 BridgeCallback 1
//   run W2 ExecSession 1 big   (the run with 2,000 tools)
//   run W2 ExecSession 1 spread (each exec on the next of 8 runs with the two tools)
//
// `spread` is for a sidecar's view of many conversations: execs back to back on one run make
// its session use more than its light share of the pool's threads, so the sidecar's fair
// queue runs them on a background lane (src/sandbox/pool/scheduler.ts, `heavy`).
//
// A sample is one exec, timed from its send to its Result event, after which its value is
// checked. Nested calls are answered at once (echo), on the ExecSession stream or with one
// BridgeCallback each, never blocking the stream's reader.
import * as grpc from "@grpc/grpc-js";
import { create } from "@bufbuild/protobuf";
import { createInterface } from "node:readline";
import { Sandbox, ExecRequestSchema, ExecSessionRequestSchema, BridgeCallbackRequestSchema } from "../../dist/gen/codemode/sandbox/v1/sandbox_pb.js";
import { Control, OpenRunRequestSchema } from "../../dist/gen/codemode/orchestrator/v1/control_pb.js";
import { ResultStatus } from "../../dist/gen/codemode/common/v1/common_pb.js";
import { W1, W2, W3, EXPECT, TWO_TOOLS } from "./workloads.mjs"; // plain strings and objects only
import { largeCatalog } from "./catalog.mjs"; // plain objects read from bench/fixtures
import { plainDefinition } from "./plain-definition.mjs"; // grpc-js and protobuf-es only

/** A grpc-js client class for a protobuf-es service descriptor: the usual hand-rolled adapter. */
const clientFor = (service) => grpc.makeGenericClientConstructor(plainDefinition(service), service.name);

const [sandboxAddress, orchestratorAddress] = process.argv.slice(2);
const SandboxClient = clientFor(Sandbox);
const ControlClient = clientFor(Control);
const sandbox = new SandboxClient(sandboxAddress, grpc.credentials.createInsecure());
const control = new ControlClient(orchestratorAddress, grpc.credentials.createInsecure());

const scopeOf = (name) => ({
  agentId: "plain-agent",
  sessionId: `plain-session-${name}-${process.pid}`,
  sessionKey: `plain-key-${process.pid}`,
  agentRunId: `plain-run-${name}-${process.pid}`,
});
const openRun = (scope, catalog) =>
  new Promise((resolve, reject) =>
    control.openRun(
      create(OpenRunRequestSchema, { scope, catalog: { case: "tools", value: catalog }, config: { maxToolCallsPerRun: 100_000, maxSearchesPerRun: 100_000 } }),
      (err, res) => (err ? reject(err) : resolve(res)),
    ),
  );
const SCOPES = { small: scopeOf("small"), big: scopeOf("big") };
await openRun(SCOPES.small, { tools: TWO_TOOLS });
await openRun(SCOPES.big, largeCatalog(2000));
const SPREAD = Array.from({ length: 8 }, (_, i) => scopeOf(`spread${i}`));
for (const scope of SPREAD) await openRun(scope, { tools: TWO_TOOLS });
let spreadNext = 0;
/** The scope of the next exec on `catalog`: `spread` takes its runs in turn. */
const scopeFor = (catalog) => (catalog === "spread" ? SPREAD[spreadNext++ % SPREAD.length] : SCOPES[catalog]);

const PROGRAMS = { W1, W2, W3 };
const deadline = () => new Date(Date.now() + 60_000);

function check(result, expect) {
  if (result.status !== ResultStatus.COMPLETED) throw new Error(`expected completed, got ${result.status}: ${result.modelJson.slice(0, 300)}`);
  const value = JSON.parse(result.valueJson);
  if (value !== expect) throw new Error(`expected value ${expect}, got ${result.valueJson.slice(0, 100)}`);
}

/** Exec, and one BridgeCallback per ToolCallRequested. Resolves to ms from send to Result. */
function execBridge(code, expect, scope) {
  return new Promise((resolve, reject) => {
    const t = performance.now();
    let result;
    let at;
    let failed;
    const call = sandbox.exec(create(ExecRequestSchema, { scope, code }), { deadline: deadline() });
    call.on("data", (ev) => {
      if (ev.event.case === "toolCall") {
        const tc = ev.event.value;
        sandbox.bridgeCallback(
          create(BridgeCallbackRequestSchema, { scope, callId: tc.callId, outcome: { case: "resultJson", value: tc.inputJson } }),
          { deadline: deadline() },
          (err) => {
            if (err) failed ??= err;
          },
        );
      } else if (ev.event.case === "result") {
        at = performance.now();
        result = ev.event.value;
      }
    });
    call.on("error", reject);
    call.on("end", () => {
      try {
        if (failed) throw failed;
        if (!result) throw new Error("stream ended without a Result");
        check(result, expect);
        resolve(at - t);
      } catch (err) {
        reject(err);
      }
    });
  });
}

/** ExecSession: the exec, then the answers, on one bidirectional stream. */
function execSession(code, expect, scope) {
  return new Promise((resolve, reject) => {
    const t = performance.now();
    let result;
    let at;
    let refused;
    const call = sandbox.execSession({ deadline: deadline() });
    call.write(create(ExecSessionRequestSchema, { message: { case: "exec", value: { scope, code } } }));
    call.on("data", (ev) => {
      if (ev.event.case === "toolCall") {
        const tc = ev.event.value;
        call.write(
          create(ExecSessionRequestSchema, { message: { case: "answer", value: { callId: tc.callId, outcome: { case: "resultJson", value: tc.inputJson } } } }),
        );
      } else if (ev.event.case === "answerRefused") {
        refused ??= new Error(`answer refused: ${ev.event.value.message}`);
      } else if (ev.event.case === "result") {
        at = performance.now();
        result = ev.event.value;
        call.end();
      }
    });
    call.on("error", reject);
    call.on("end", () => {
      try {
        if (refused) throw refused;
        if (!result) throw new Error("session ended without a Result");
        check(result, expect);
        resolve(at - t);
      } catch (err) {
        reject(err);
      }
    });
  });
}

const WAYS = { ExecSession: execSession, BridgeCallback: execBridge };

process.stdout.write("ready\n");
for await (const line of createInterface({ input: process.stdin })) {
  const [verb, workload, way, count, catalog = "small"] = line.trim().split(/\s+/);
  if (verb === "quit") break;
  let reply;
  try {
    if (verb !== "run" || !(workload in PROGRAMS) || !(way in WAYS) || !(catalog in SCOPES || catalog === "spread"))
      throw new Error(`unknown command: ${line}`);
    const samples = [];
    for (let i = 0; i < Number(count ?? 1); i++) samples.push(await WAYS[way](PROGRAMS[workload], EXPECT[workload], scopeFor(catalog)));
    reply = { samples };
  } catch (err) {
    reply = { error: err instanceof Error ? err.message : String(err) };
  }
  process.stdout.write(`${JSON.stringify(reply)}\n`);
}
sandbox.close();
control.close();

/**
 * One guest cannot take others down, against a real one-thread sidecar hosting several
 * VMs: when a run's native loop holds their worker thread until it is killed, a co-hosted
 * run that had already streamed output and a tool call continues on another thread from
 * the image it parked while idle (moved while the loop holds the thread, or after the
 * kill), and completes normally (nothing it streamed is repeated).
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { Control } from "../../src/gen/codemode/orchestrator/v1/control_pb.js";
import { Sandbox } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { createClient, type ServiceClient } from "../../src/protocol/grpc-client.js";
import { collectStream, logged, spawnCodemode, type Proc } from "../helpers/harness.js";
import { openRun } from "../helpers/gateway.js";

let proc: Proc;
let sandbox: ServiceClient<typeof Sandbox.method>;
let control: ServiceClient<typeof Control.method>;
beforeAll(async () => {
  proc = await spawnCodemode([
    "start",
    "--sandbox-address",
    "127.0.0.1:0",
    "--orchestrator-address",
    "127.0.0.1:0",
    "--threads",
    "1",
    "--execs-per-worker",
    "4",
  ]);
  sandbox = createClient(Sandbox, proc.ready.sandbox!);
  control = createClient(Control, proc.ready.orchestrator!);
});
afterAll(async () => {
  sandbox.close();
  control.close();
  expect(await proc.stop()).toBe(0);
});

it("a run co-hosted with a native runaway loop survives the kill of their thread", async () => {
  const { scope } = await openRun({ control }, [{ name: "slow", description: "Answers late." }]);
  const calls: string[] = [];
  let announce!: (callId: string) => void;
  const called = new Promise<string>((r) => (announce = r));
  const victim = collectStream(
    sandbox.exec({
      scope,
      code: `text("before"); const r = await tools.slow({}); text("after " + r); return { r, n: [1, 2, 3].map((x) => x * 2) };`,
      config: { timeoutMs: 15_000 },
    }),
    (call) => {
      calls.push(call.callId);
      announce(call.callId);
    },
  );
  // The victim's VM is idle, awaiting its tool, when the neighbour's loop comes.
  const callId = await called;
  const hostileScope = (await openRun({ control }, [{ name: "x" }])).scope;
  const hostile = await collectStream(sandbox.exec({ scope: hostileScope, code: 'new Array(2 ** 32 - 1).join("")', config: { timeoutMs: 1_000 } }));
  expect(hostile.model).toMatchObject({ status: "failed", code: "timeout" });
  // Answered after the neighbour's loop got the thread killed (its exec ended with the kill).
  await sandbox.bridgeCallback({ scope, callId, outcome: { case: "resultJson", value: '"late"' } });
  const out = await victim;
  expect(out.model).toMatchObject({ status: "completed", value: { r: "late", n: [2, 4, 6] } });
  expect(out.model.output).toEqual([
    { type: "text", text: "before" },
    { type: "text", text: "after late" },
  ]);
  expect(calls).toHaveLength(1);
  // Either the pool moved the idle run to a surge thread while the loop held theirs, or it
  // continued it there after the kill: from its parked image both ways.
  await logged(proc, /continuing a run whose worker was killed for another run|moving an idle run off a lane another guest holds/);
});

/**
 * A store outage while a checkpoint must be invalidated, against real processes and a real
 * Redis stalled with SIGSTOP (`--store-timeout-ms 300`). A VM idle past checkpointAfterMs is
 * checkpointed; its tool answer arrives, Redis stalls, and the VM makes its next call, which
 * must wait until the stored snapshot is invalidated. Store back before the VM's deadline:
 * the call goes out and the exec completes, each tool asked once. Store back only after it:
 * the exec (or a wait, resumed from its stored snapshot) ends `runtime_unavailable` by its
 * deadline without sending the call, the run stays resumable, and a wait once Redis is back
 * resumes it from that snapshot, asking each tool once.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ExecEvent, Sandbox } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import type { ServiceClient } from "../../src/protocol/grpc-client.js";
import { openRun, type TestTool } from "../helpers/gateway.js";
import { collectStream, logged, startCluster, type Cluster, type ExecOutcome, type ToolCallEvent } from "../helpers/harness.js";
import { startRedis, type RedisServer } from "../helpers/redis.js";
import { until } from "../helpers/until.js";

const tools: TestTool[] = [
  { name: "slow_a", description: "A slow tool" },
  { name: "slow_b", description: "Another slow tool" },
];

/** Takes the first answer, says so, computes a moment (a timer: no checkpoint meanwhile), then calls again. */
const CODE = `
  const a = await tools.slow_a({});
  text("a=" + a);
  await new Promise((r) => setTimeout(r, 500));
  text("calling b");
  const b = await tools.slow_b({ a });
  return a + b;
`;

type Scope = Awaited<ReturnType<typeof openRun>>["scope"];
type Client = ServiceClient<typeof Sandbox.method>;

let redis: RedisServer;
let cluster: Cluster;

beforeAll(async () => {
  redis = await startRedis();
  cluster = await startCluster({ sidecars: 1, orchestratorArgs: ["--store", redis.url, "--store-timeout-ms", "300"] });
}, 60_000);

afterAll(async () => {
  redis?.resume();
  const codes = await cluster?.stop();
  await redis?.stop();
  expect(codes?.every((c) => c === 0)).toBe(true);
});

const answer = (sandbox: Client, scope: Scope, callId: string, value: unknown) =>
  sandbox.bridgeCallback({ scope, callId, outcome: { case: "resultJson", value: JSON.stringify(value) } });

/** A stream's text outputs, as they arrive. */
function texts(into: string[]) {
  return (ev: ExecEvent) => {
    if (ev.event.case === "output" && ev.event.value.kind.case === "text") into.push(ev.event.value.kind.value);
  };
}

/** Runs a wait to its end, answering each nested call it makes with `value`. */
async function waitAnswering(sandbox: Client, scope: Scope, runId: string, value: unknown, calls: ToolCallEvent[], outputs: string[]) {
  const answers: Array<Promise<unknown>> = [];
  const done = await collectStream(
    sandbox.wait({ scope, codeModeRunId: runId, waitCallId: `wait-${calls.length}` }),
    (c) => {
      calls.push(c);
      answers.push(answer(sandbox, scope, c.callId, value));
    },
    texts(outputs),
  );
  await Promise.all(answers);
  return done;
}

/** How many times each tool was asked for, over every call the gateway got. */
const asked = (calls: ToolCallEvent[]) => calls.map((c) => c.toolName).sort();

/**
 * Starts the exec and brings it to the point of the test: its first call asked, its VM
 * checkpointed, the answer kept with the checkpoint and taken by the VM. Then Redis stalls
 * before the VM's next call (its timer is still running).
 */
async function checkpointedThenStalled(scope: Scope, calls: ToolCallEvent[], outputs: string[]): Promise<{ exec: Promise<ExecOutcome> }> {
  const sidecar = cluster.sidecars[0]!;
  const from = sidecar.proc.stderr.length;
  const exec = collectStream(sidecar.sandbox.exec({ scope, code: CODE }), (c) => calls.push(c), texts(outputs));
  await until(() => calls.length === 1, "the first nested call");
  await logged(sidecar.proc, /"run checkpointed"/, { from });
  expect((await answer(sidecar.sandbox, scope, calls[0]!.callId, 40)).deliveredLive).toBe(false);
  await until(() => outputs.includes("a=40"), "the VM to take the answer kept with its checkpoint");
  redis.pause();
  return { exec };
}

describe("a store outage while a checkpoint must be invalidated", () => {
  it("holds the VM's next call until the store is back, then sends it: the exec completes, each tool asked once", async () => {
    const sidecar = cluster.sidecars[0]!;
    const { scope } = await openRun(cluster, tools, {}, { config: { timeoutMs: 30_000, checkpointAfterMs: 300 } });
    const calls: ToolCallEvent[] = [];
    const outputs: string[] = [];
    const fromOrchestrator = cluster.orchestrator.stderr.length;
    const fromSidecar = sidecar.proc.stderr.length;
    const { exec } = await checkpointedThenStalled(scope, calls, outputs);
    try {
      await until(() => outputs.includes("calling b"), "the VM to make its next call");
      // The invalidation before it fails within the store's bound, and is tried again meanwhile.
      await logged(cluster.orchestrator, /the orchestrator's store cannot be reached/, { from: fromOrchestrator });
      await new Promise((r) => setTimeout(r, 1_500));
      expect(asked(calls)).toEqual(["slow_a"]);
    } finally {
      redis.resume();
    }
    await until(() => calls.length === 2, "the held call to go out once the store is back");
    await answer(sidecar.sandbox, scope, calls[1]!.callId, 2);
    const done = await exec;
    expect(done.model, JSON.stringify(done.model)).toMatchObject({ status: "completed", value: 42 });
    expect(asked(calls)).toEqual(["slow_a", "slow_b"]);
    expect(outputs.filter((o) => o === "a=40")).toHaveLength(1);
    await logged(sidecar.proc, /"held a nested call while the orchestrator's store could not be reached.*the invalidation landed and the call went out"/, {
      from: fromSidecar,
    });
  }, 90_000);

  it("ends an exec by its deadline without sending the held call, keeps its checkpoint, and a wait resumes it once the store is back", async () => {
    const sidecar = cluster.sidecars[0]!;
    const { scope } = await openRun(cluster, tools, {}, { config: { timeoutMs: 4_000, checkpointAfterMs: 300 } });
    const calls: ToolCallEvent[] = [];
    const outputs: string[] = [];
    const fromSidecar = sidecar.proc.stderr.length;
    const { exec } = await checkpointedThenStalled(scope, calls, outputs);
    let ended: ExecOutcome;
    try {
      ended = await exec;
    } finally {
      redis.resume();
    }
    const runId = calls[0]!.codeModeRunId;
    expect(ended.model).toMatchObject({ status: "failed", code: "runtime_unavailable" });
    expect(ended.model.error).toMatch(/could not send this run's next tool call: the orchestrator's store cannot be reached/);
    expect(ended.model.error).toContain(`wait with runId "${runId}"`);
    expect(ended.result.codeModeRunId).toBe(runId);
    expect(outputs).toContain("calling b");
    expect(asked(calls)).toEqual(["slow_a"]);
    await logged(sidecar.proc, /"held a nested call .*the VM parked first, so the call was not sent; the run is kept/, { from: fromSidecar });
    // Once Redis answers again the checkpoint is kept for good (a late try of the invalidation changes nothing).
    await logged(sidecar.proc, /"the store answered again: the run is kept at its stored checkpoint, unclaimed/, { from: fromSidecar, ms: 20_000 });

    const resumed: string[] = [];
    const done = await waitAnswering(sidecar.sandbox, scope, runId, 2, calls, resumed);
    expect(done.model, JSON.stringify(done.model)).toMatchObject({ status: "completed", value: 42 });
    // Resumed from the checkpoint: the kept answer is taken again, and the held call is made for the first time.
    expect(resumed).toEqual(["a=40", "calling b"]);
    expect(asked(calls)).toEqual(["slow_a", "slow_b"]);
  }, 90_000);

  it("ends a wait by its deadline without sending the held call, keeps the run it resumed, and a later wait resumes it", async () => {
    const sidecar = cluster.sidecars[0]!;
    // No checkpoint of the exec's VM: the wait's stored snapshot is the suspension the exec ended with.
    const { scope } = await openRun(cluster, tools, {}, { config: { timeoutMs: 3_000, checkpointAfterMs: 60_000 } });
    const calls: ToolCallEvent[] = [];
    const parked = await collectStream(sidecar.sandbox.exec({ scope, code: CODE }), (c) => calls.push(c));
    expect(parked.model).toMatchObject({ status: "waiting" });
    const runId = parked.model.runId!;
    await answer(sidecar.sandbox, scope, calls[0]!.callId, 40);

    const fromSidecar = sidecar.proc.stderr.length;
    const first: string[] = [];
    const onFirst = texts(first);
    let stalled = false;
    let ended: ExecOutcome;
    try {
      ended = await collectStream(
        sidecar.sandbox.wait({ scope, codeModeRunId: runId, waitCallId: "wait-during-outage" }),
        (c) => calls.push(c),
        (ev) => {
          onFirst(ev);
          // The resumed VM took the answer: Redis stalls before its timer ends and it calls again.
          if (first.includes("a=40") && !stalled) {
            stalled = true;
            redis.pause();
          }
        },
      );
    } finally {
      redis.resume();
    }
    expect(ended.model).toMatchObject({ status: "failed", code: "runtime_unavailable" });
    expect(ended.model.error).toContain(`The run is kept at that checkpoint: wait with runId "${runId}"`);
    expect(first).toEqual(["a=40", "calling b"]);
    expect(asked(calls)).toEqual(["slow_a"]);
    await logged(sidecar.proc, /"the store answered again: the run is kept at its stored checkpoint, unclaimed/, { from: fromSidecar, ms: 20_000 });

    const second: string[] = [];
    const done = await waitAnswering(sidecar.sandbox, scope, runId, 2, calls, second);
    expect(done.model, JSON.stringify(done.model)).toMatchObject({ status: "completed", value: 42 });
    expect(second).toEqual(["a=40", "calling b"]);
    expect(asked(calls)).toEqual(["slow_a", "slow_b"]);
  }, 90_000);
});

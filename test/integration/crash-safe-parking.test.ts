// Crash-safe parking against real processes, on the in-memory store (an orchestrator apart
// from its sidecars) and on Redis. A VM idle on tool answers past checkpointAfterMs is
// checkpointed; its sidecar is then killed with SIGKILL, and a `wait` on another sidecar
// (the gateway knows the run id from ToolCallRequested.code_mode_run_id) resumes the run
// from the checkpoint with every answer sent meanwhile, without repeating a call. A VM that
// made a call after its checkpoint is reported lost instead. A wait that was running on a
// killed sidecar is retried elsewhere once the orchestrator releases the dead sidecar's
// claims, well within the claim's lease.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createClient, type ServiceClient } from "../../src/protocol/grpc-client.js";
import { Sandbox } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { Refusal } from "../../src/gen/codemode/common/v1/common_pb.js";
import type { ServiceError } from "../../src/protocol/service-error.js";
import { openRun, type TestTool } from "../helpers/gateway.js";
import {
  collectStream,
  logged,
  SHARED_SNAPSHOT_KEY,
  spawnCodemode,
  startCluster,
  waitFor,
  type Cluster,
  type ExecOutcome,
  type Proc,
  type ToolCallEvent,
} from "../helpers/harness.js";
import { startRedis, type RedisServer } from "../helpers/redis.js";
import { until } from "../helpers/until.js";

const tools: TestTool[] = [
  { name: "slow_a", description: "A slow tool" },
  { name: "slow_b", description: "Another slow tool" },
];
/** Long enough that nothing suspends on its own; a checkpoint comes after a short idle stretch. */
const CONFIG = { timeoutMs: 30_000, checkpointAfterMs: 300 };

type Scope = Awaited<ReturnType<typeof openRun>>["scope"];
type Victim = { proc: Proc; sandbox: ServiceClient<typeof Sandbox.method> };

/** A sidecar of the cluster that the test kills. */
async function startVictim(cluster: Cluster): Promise<Victim> {
  const proc = await spawnCodemode(["sandbox", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", cluster.linkAddress, "--threads", "1"], {
    CODEMODE_SNAPSHOT_KEY: SHARED_SNAPSHOT_KEY,
  });
  await logged(cluster.orchestrator, new RegExp(`"sidecar attached".*"address":"${proc.ready.sandbox}"|"address":"${proc.ready.sandbox}".*"sidecar attached"`));
  return { proc, sandbox: createClient(Sandbox, proc.ready.sandbox!) };
}

function kill(victim: Victim): Promise<unknown> {
  victim.sandbox.close();
  const exited = new Promise((r) => victim.proc.child.once("exit", r));
  victim.proc.child.kill("SIGKILL");
  return exited;
}

const answer = (sandbox: Victim["sandbox"], scope: Scope, callId: string, value: unknown) =>
  sandbox.bridgeCallback({ scope, callId, outcome: { case: "resultJson", value: JSON.stringify(value) } });

/** A wait, sent again while the run is still held by a claim of the killed sidecar (its grace, then its claims end). */
async function waitOnceFree(
  sandbox: ServiceClient<typeof Sandbox.method>,
  scope: Scope,
  runId: string,
  onCall?: (c: ToolCallEvent) => void,
): Promise<ExecOutcome> {
  return until(
    async () => {
      const out = await waitFor(sandbox, { scope, runId }, onCall);
      return out.model.error?.includes("already in flight") ? undefined : out;
    },
    "the killed sidecar's claim on the run to end",
    { ms: 60_000, everyMs: 500 },
  );
}

describe.each([
  { store: "memory", redis: false },
  { store: "redis", redis: true },
])("crash-safe parking on the $store store", ({ redis: withRedis }) => {
  let redis: RedisServer | undefined;
  let cluster: Cluster;

  beforeAll(async () => {
    if (withRedis) redis = await startRedis();
    cluster = await startCluster({ sidecars: 1, ...(redis ? { orchestratorArgs: ["--store", redis.url] } : {}) });
  }, 60_000);

  afterAll(async () => {
    const codes = await cluster?.stop();
    await redis?.stop();
    expect(codes?.every((c) => c === 0)).toBe(true);
  });

  it("resumes a parked run of a SIGKILLed sidecar from its checkpoint, with the answers sent before and after the kill, repeating no call", async () => {
    const victim = await startVictim(cluster);
    const survivor = cluster.sidecars[0]!.sandbox;
    const { scope } = await openRun(cluster, tools, {}, { config: CONFIG });
    const calls: ToolCallEvent[] = [];
    const outputs: string[] = [];
    const code = `
      const a = tools.slow_a({}).then((v) => { text("a=" + v); return v; });
      const [x, y] = await Promise.all([a, tools.slow_b({})]);
      return { x, y };
    `;
    const exec = collectStream(
      victim.sandbox.exec({ scope, code }),
      (c) => calls.push(c),
      (ev) => {
        if (ev.event.case === "output" && ev.event.value.kind.case === "text") outputs.push(ev.event.value.kind.value);
      },
    );
    const cut = exec.catch((err: unknown) => err as ServiceError);
    await until(() => calls.length === 2, "both nested calls");
    const from = victim.proc.stderr.length;
    await logged(victim.proc, /"run checkpointed"/, { from });
    const [callA, callB] = [calls.find((c) => c.toolName === "slow_a")!, calls.find((c) => c.toolName === "slow_b")!];
    const runId = callA.codeModeRunId;
    expect(runId).not.toBe("");

    // After the checkpoint, before the kill: kept with the checkpoint, and taken by the live VM.
    await answer(victim.sandbox, scope, callA.callId, 20);
    await until(() => outputs.includes("a=20"), "the live VM to take the first answer");
    await kill(victim);
    expect(((await cut) as ServiceError).code).toBe("unavailable");

    // After the kill: any sidecar takes the answer for the parked run.
    expect((await answer(survivor, scope, callB.callId, 22)).deliveredLive).toBe(false);
    const again: ToolCallEvent[] = [];
    const done = await waitOnceFree(survivor, scope, runId, (c) => again.push(c));
    expect(done.model, JSON.stringify(done.model)).toMatchObject({ status: "completed", value: { x: 20, y: 22 } });
    expect(again).toEqual([]);
    expect(new Set(calls.map((c) => c.callId)).size).toBe(2);
    await logged(cluster.orchestrator, /"released the claims of a sidecar that did not come back/);
  }, 90_000);

  it("reports a run lost when its VM made a call after its checkpoint, and never resumes the stale checkpoint", async () => {
    const victim = await startVictim(cluster);
    const survivor = cluster.sidecars[0]!.sandbox;
    const { scope } = await openRun(cluster, tools, {}, { config: CONFIG });
    const calls: ToolCallEvent[] = [];
    const exec = collectStream(victim.sandbox.exec({ scope, code: `const a = await tools.slow_a({}); const b = await tools.slow_b({ a }); return b;` }), (c) =>
      calls.push(c),
    ).catch((err: unknown) => err as ServiceError);
    await until(() => calls.length === 1, "the first nested call");
    await logged(victim.proc, /"run checkpointed"/);
    // The answer wakes the VM, which calls again: the checkpoint is invalidated before that call goes out.
    await answer(victim.sandbox, scope, calls[0]!.callId, 1);
    await until(() => calls.length === 2, "the second nested call");
    await logged(cluster.orchestrator, /"checkpoint invalidated/);
    await kill(victim);
    expect(((await exec) as ServiceError).code).toBe("unavailable");

    const again: ToolCallEvent[] = [];
    const out = await waitOnceFree(survivor, scope, calls[0]!.codeModeRunId, (c) => again.push(c));
    expect(out.model.status).toBe("failed");
    expect(out.model.error).toMatch(/code mode run was lost: .*since its last checkpoint/);
    expect(again).toEqual([]);
    // Every later wait says the same.
    expect((await waitFor(survivor, { scope, runId: calls[0]!.codeModeRunId })).model.error).toMatch(/was lost/);
  }, 90_000);

  it("reports a run lost when its sidecar died before the run was ever stored; another run's wait for its id is told it is unavailable", async () => {
    const victim = await startVictim(cluster);
    const survivor = cluster.sidecars[0]!.sandbox;
    // No checkpoint comes within the test: the run never reaches the store.
    const { scope } = await openRun(cluster, tools, {}, { config: { ...CONFIG, checkpointAfterMs: 25_000 } });
    const calls: ToolCallEvent[] = [];
    const exec = collectStream(victim.sandbox.exec({ scope, code: "return await tools.slow_a({})" }), (c) => calls.push(c)).catch(
      (err: unknown) => err as ServiceError,
    );
    await until(() => calls.length === 1, "the nested call");
    const runId = calls[0]!.codeModeRunId;
    const from = cluster.orchestrator.stderr.length;
    await kill(victim);
    expect(((await exec) as ServiceError).code).toBe("unavailable");
    await logged(cluster.orchestrator, /"msg":"a gone sidecar was running code mode runs that were never stored/, { ms: 30_000, from });
    const out = await waitFor(survivor, { scope, runId });
    expect(out.model.status).toBe("failed");
    expect(out.model.error).toMatch(/^code mode run was lost: the sandbox running it stopped before any of its state was stored/);
    expect(out.result.refusal).toBe(Refusal.RUN_LOST);
    // Another agent run's wait for the same id learns nothing of it.
    const other = await openRun(cluster, tools, {}, { config: CONFIG });
    expect((await waitFor(survivor, { scope: other.scope, runId })).model.error).toBe("code mode run is unavailable or expired.");
  }, 90_000);

  it("changes nothing for a run whose sidecar lives: checkpoints, an invalidation, a suspension on top, a wait elsewhere, and a replay that is the same", async () => {
    const [sidecar] = cluster.sidecars;
    const { scope } = await openRun(cluster, tools, {}, { config: { timeoutMs: 2_000, checkpointAfterMs: 200 } });
    const calls: ToolCallEvent[] = [];
    const from = sidecar!.proc.stderr.length;
    const exec = collectStream(
      sidecar!.sandbox.exec({ scope, code: `const a = await tools.slow_a({}); text("a=" + a); const b = await tools.slow_b({ a }); return a + b;` }),
      (c) => calls.push(c),
    );
    await until(() => calls.length === 1, "the first nested call");
    await logged(sidecar!.proc, /"run checkpointed"/, { from });
    // Answered on the sidecar that holds the VM: kept with the checkpoint, then taken live.
    expect((await answer(sidecar!.sandbox, scope, calls[0]!.callId, 40)).deliveredLive).toBe(false);
    const parked = await exec;
    // The second call went out after the checkpoint was invalidated; the VM checkpointed again, then suspended on top.
    expect(parked.model).toMatchObject({ status: "waiting", output: [{ type: "text", text: "a=40" }] });
    expect(calls.map((c) => c.toolName)).toEqual(["slow_a", "slow_b"]);
    await answer(sidecar!.sandbox, scope, calls[1]!.callId, 2);
    const done = await waitFor(sidecar!.sandbox, { scope, runId: parked.model.runId! }, (c) => calls.push(c));
    expect(done.model).toMatchObject({ status: "completed", value: 42 });
    expect(calls).toHaveLength(2);
    const traj = await cluster.control.getTrajectory({ scope });
    expect(traj.steps.map((st) => [st.kind, st.status])).toEqual([
      ["exec", "waiting"],
      ["wait", "completed"],
    ]);
    expect(traj.steps[0]!.nestedCalls.map((n) => n.outcome)).toEqual(["ok", "ok"]);
    // Replayed, the wait resumes the suspension the exec stored, whatever generations the checkpoints took.
    expect((await cluster.control.replayRun({ scope, codeModeRunId: parked.model.runId! })).verdict).toBe("same");
  }, 90_000);

  it("lets a wait that was running on a SIGKILLed sidecar be retried elsewhere once its claims are released", async () => {
    const victim = await startVictim(cluster);
    const survivor = cluster.sidecars[0]!.sandbox;
    const { scope } = await openRun(cluster, tools, {}, { config: { timeoutMs: 500 } });
    const calls: ToolCallEvent[] = [];
    const parked = await collectStream(victim.sandbox.exec({ scope, code: `return await tools.slow_a({});` }), (c) => calls.push(c));
    expect(parked.model.status).toBe("waiting");
    const runId = parked.model.runId!;
    // A wait on the victim claims the run and waits there for the first answer.
    const from = cluster.orchestrator.stderr.length;
    const cut = waitFor(victim.sandbox, { scope, runId }).catch((err: unknown) => err as ServiceError);
    await logged(cluster.orchestrator, /"suspended run claimed by a wait"/, { from });
    await kill(victim);
    expect(((await cut) as ServiceError).code).toBe("unavailable");
    await answer(survivor, scope, calls[0]!.callId, 7);
    const done = await waitOnceFree(survivor, scope, runId);
    expect(done.model).toMatchObject({ status: "completed", value: 7 });
  }, 90_000);
});

// Suspend and resume through real processes: an orchestrator and two sandbox sidecars,
// each its own process on 127.0.0.1 port 0. A run suspended on one sidecar is resumed
// by the other (the seed's E2E steps 12–16), and every way a wait can be refused or a
// snapshot dropped is checked from the gateway's side.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RunScope } from "../../src/gen/codemode/common/v1/common_pb.js";
import { Refusal, ResultStatus, WaitReason } from "../../src/gen/codemode/common/v1/common_pb.js";
import { openRun, type TestTool } from "../helpers/gateway.js";
import {
  execute,
  logged,
  type scope as newScope,
  SHARED_SNAPSHOT_KEY,
  spawnCodemode,
  startCluster,
  waitFor,
  type Cluster,
  type ToolCallEvent,
} from "../helpers/harness.js";
import { until } from "../helpers/until.js";

const tools: TestTool[] = [
  { name: "slow_lookup", description: "Looks something up slowly", parameters: { type: "object", properties: { key: { type: "string" } } } },
  { name: "fast_add", description: "Adds two numbers", parameters: { type: "object", properties: { a: { type: "number" }, b: { type: "number" } } } },
];

let cluster: Cluster;
const A = () => cluster.sidecars[0]!.sandbox;
const B = () => cluster.sidecars[1]!.sandbox;

async function answer(sandbox: ReturnType<typeof A>, scope: RunScope | ReturnType<typeof newScope>, callId: string, value: unknown) {
  return sandbox.bridgeCallback({ scope, callId, outcome: { case: "resultJson", value: JSON.stringify(value) } });
}

/** The ServiceError code a call failed with (the client maps gRPC statuses to them). */
async function errorCode(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
    return undefined;
  } catch (err) {
    return (err as { code?: string }).code;
  }
}

/** Resolves once the orchestrator logged that a wait claimed run `runId` (call it before starting the wait). */
function claimed(runId: string): Promise<string> {
  return logged(cluster.orchestrator, new RegExp(`"codeModeRunId":"${runId}".*"suspended run claimed by a wait"`), {
    from: cluster.orchestrator.stderr.length,
  });
}

/** Execs `code` on sidecar A with the test tools and a short timeout; nested calls are left unanswered. */
async function suspendOnA(code: string, config: Record<string, unknown> = {}) {
  const { scope } = await openRun(cluster, tools, {}, { config: { timeoutMs: 1000, ...config } });
  const calls: ToolCallEvent[] = [];
  const out = await execute({ sandbox: A() }, { scope, code }, (c) => calls.push(c));
  return { scope, calls, ...out };
}

beforeAll(async () => {
  cluster = await startCluster({ sidecars: 2, orchestratorArgs: ["--max-suspended-runs", "6"] });
});

afterAll(async () => {
  const codes = await cluster?.stop();
  expect(codes?.every((c) => c === 0)).toBe(true);
});

describe("exec → waiting → wait on another sidecar (seed E2E 12–16)", () => {
  it("a tool slower than timeoutMs suspends; the answer given later on any sidecar is delivered into the VM restored by the other sidecar", async () => {
    const { scope, calls, result, model } = await suspendOnA(`
      text("before");
      const found = await tools.slow_lookup({ key: "alpha" });
      text("after " + found.value);
      const sum = await tools.fast_add({ a: 2, b: 3 });
      return { found, sum };
    `);
    expect(model.status).toBe("waiting");
    expect(result.status).toBe(ResultStatus.WAITING);
    expect(model.reason).toBe("pending_tools");
    expect(result.reason).toBe(WaitReason.PENDING_TOOLS);
    expect(model.runId).toMatch(/^cm_/);
    expect(model.pendingToolCalls).toEqual([{ id: calls[0]!.callId, toolId: "openclaw:core:slow_lookup", name: "slow_lookup" }]);
    expect(model.output).toEqual([{ type: "text", text: "before" }]);
    const snapshotBytes = model.telemetry.snapshotBytes as number;
    expect(snapshotBytes).toBeGreaterThan(0);
    expect(snapshotBytes).toBeLessThan(64 * 1024);
    expect(Number(result.telemetry?.snapshotBytes)).toBe(snapshotBytes);

    // The gateway answers after exec returned, on the *other* sidecar: stored with the run.
    const routed = await answer(B(), scope, calls[0]!.callId, { value: 42 });
    expect(routed.deliveredLive).toBe(false);

    const waitCalls: ToolCallEvent[] = [];
    const resumed = await waitFor(B(), { scope, runId: model.runId! }, (c) => {
      waitCalls.push(c);
      void answer(B(), scope, c.callId, 5);
    });
    expect(resumed.model.status).toBe("completed");
    expect(resumed.model.value).toEqual({ found: { value: 42 }, sum: 5 });
    expect(resumed.model.output).toEqual([{ type: "text", text: "after 42" }]);
    expect(waitCalls.map((c) => c.toolName)).toEqual(["fast_add"]);
    expect(resumed.model.telemetry.callCount).toBe(2);
    expect(resumed.model.telemetry.snapshotBytes).toBeUndefined();

    // The trajectory shows the exec and the wait, each with the nested calls made under it.
    const traj = await cluster.control.getTrajectory({ scope });
    expect(traj.steps.map((s) => [s.kind, s.status])).toEqual([
      ["exec", "waiting"],
      ["wait", "completed"],
    ]);
    // The call was answered while the run was suspended: its step says so.
    expect(traj.steps[0]!.nestedCalls.map((n) => [n.toolName, n.outcome, n.answeredWhileSuspended])).toEqual([["slow_lookup", "ok", true]]);
    expect(traj.steps[1]!.nestedCalls.map((n) => [n.toolName, n.outcome])).toEqual([["fast_add", "ok"]]);

    // Completed: the snapshot is gone.
    const again = await waitFor(A(), { scope, runId: model.runId! });
    expect(again.model).toMatchObject({ status: "failed", code: "invalid_input", error: "code mode run is unavailable or expired." });
  });

  it("yield_control suspends with reason yield and wait continues where it left off", async () => {
    const { scope, model } = await suspendOnA(`
      let n = 0;
      for (const step of ["one", "two"]) { n++; text(step); await yield_control("step " + step); }
      return n;
    `);
    expect(model).toMatchObject({ status: "waiting", reason: "yield", output: [{ type: "text", text: "one" }] });
    expect(model.pendingToolCalls).toBeUndefined();
    const second = await waitFor(B(), { scope, runId: model.runId! });
    expect(second.model).toMatchObject({ status: "waiting", reason: "yield", runId: model.runId, output: [{ type: "text", text: "two" }] });
    const done = await waitFor(A(), { scope, runId: model.runId! });
    expect(done.model).toMatchObject({ status: "completed", value: 2 });
    expect(done.model.output).toBeUndefined();
  });

  it("a wait with nothing settled in time returns waiting again; a partly answered run lists only the unsettled calls", async () => {
    const { scope, calls, model } = await suspendOnA(`
      const [a, b] = await Promise.all([tools.slow_lookup({ key: "a" }), tools.slow_lookup({ key: "b" })]);
      return a + b;
    `);
    expect(model.pendingToolCalls).toHaveLength(2);
    const idle = await waitFor(B(), { scope, runId: model.runId! });
    expect(idle.model).toMatchObject({ status: "waiting", reason: "pending_tools", runId: model.runId });
    expect(idle.model.pendingToolCalls).toHaveLength(2);

    await answer(A(), scope, calls[0]!.callId, "x");
    const partial = await waitFor(B(), { scope, runId: model.runId! });
    expect(partial.model.status).toBe("waiting");
    expect(partial.model.pendingToolCalls).toEqual([{ id: calls[1]!.callId, toolId: "openclaw:core:slow_lookup", name: "slow_lookup" }]);

    await answer(B(), scope, calls[1]!.callId, "y");
    const done = await waitFor(A(), { scope, runId: model.runId! });
    expect(done.model).toMatchObject({ status: "completed", value: "xy" });
  });

  it("answers that arrive while the resumed VM runs are drained within the same wait", async () => {
    const { scope, calls, model } = await suspendOnA(
      `
      const a = tools.slow_lookup({ key: "a" });
      const b = tools.slow_lookup({ key: "b" });
      return (await a) + (await b);
    `,
      { timeoutMs: 2000 },
    );
    await answer(A(), scope, calls[0]!.callId, 1);
    // The second answer arrives once the wait has claimed the run, so during that wait.
    const late = claimed(model.runId!).then(() => answer(B(), scope, calls[1]!.callId, 2));
    const done = await waitFor(B(), { scope, runId: model.runId! });
    await late;
    expect(done.model).toMatchObject({ status: "completed", value: 3 });
  });
});

describe("answers for live calls on another sidecar", () => {
  it("an answer sent to the wrong sidecar is forwarded to the one whose live VM awaits it", async () => {
    const { scope } = await openRun(cluster, tools, {}, { config: { timeoutMs: 20_000 } });
    let announce!: (callId: string) => void;
    const called = new Promise<string>((r) => (announce = r));
    const onA = execute({ sandbox: A() }, { scope, code: `const r = await tools.slow_lookup({ key: "k" }); return "live " + r;` }, (c) => announce(c.callId));
    const callId = await called;
    // The VM is live on A. Another scope's answer is not delivered, on either sidecar: A, which
    // knows whose call it is, refuses it; B, which never saw the call, finds no one to take it.
    const other = { ...scope, agentRunId: `${scope.agentRunId}-other` };
    expect(await errorCode(answer(A(), other, callId, "from another scope"))).toBe("permission_denied");
    expect(await errorCode(answer(B(), other, callId, "from another scope"))).toBe("not_found");
    // The gateway answers on B.
    const res = await B().bridgeCallback({ scope, callId, outcome: { case: "resultJson", value: '"via B"' } });
    expect(res.deliveredLive).toBe(true);
    const out = await onA;
    expect(out.model).toMatchObject({ status: "completed", value: "live via B" });
    // Still precise once settled: another scope's answer for it is refused, and a second answer too.
    expect(await errorCode(answer(A(), other, callId, "again"))).toBe("permission_denied");
    expect(await errorCode(answer(A(), scope, callId, "again"))).toBe("already_exists");
  });
});

describe("many runs at once", () => {
  it("24 runs suspended across two sidecars, answered in random order on either, each completes with its own values", async () => {
    // Its own cluster: the shared one has a small cap for the cap test.
    const big = await startCluster({ sidecars: 2 });
    try {
      const runs = await Promise.all(
        Array.from({ length: 24 }, async (_, i) => {
          const { scope } = await openRun(big, tools, {}, { config: { timeoutMs: 3000 } });
          const calls: ToolCallEvent[] = [];
          const sidecar = big.sidecars[i % 2]!.sandbox;
          const out = await execute(
            { sandbox: sidecar },
            {
              scope,
              code: `const [a, b] = await Promise.all([tools.slow_lookup({ i: ${i} }), tools.slow_lookup({ i: ${i} })]); text("run ${i}"); return [a, b];`,
            },
            (c) => calls.push(c),
          );
          return { i, scope, calls, model: out.model };
        }),
      );
      const notWaiting = runs.filter((r) => r.model.status !== "waiting" || r.calls.length !== 2);
      expect(notWaiting.map((r) => ({ i: r.i, calls: r.calls.length, model: r.model }))).toEqual([]);
      const answers = runs.flatMap((r) => r.calls.map((c, k) => ({ r, c, value: `${r.i}-${k}` })));
      answers.sort(() => Math.random() - 0.5);
      await Promise.all(answers.map(({ r, c, value }, n) => answer(big.sidecars[n % 2]!.sandbox, r.scope, c.callId, value)));
      const done = await Promise.all(runs.map((r) => waitFor(big.sidecars[(r.i + 1) % 2]!.sandbox, { scope: r.scope, runId: r.model.runId! })));
      for (const [k, d] of done.entries()) {
        expect(d.model).toMatchObject({
          status: "completed",
          value: [`${runs[k]!.i}-0`, `${runs[k]!.i}-1`],
          output: [{ type: "text", text: `run ${runs[k]!.i}` }],
        });
      }
    } finally {
      expect((await big.stop()).every((c) => c === 0)).toBe(true);
    }
  });
});

describe("wait refusals and cleanup", () => {
  it("refuses an unknown runId, a missing runId, and another session's or agent run's wait, leaving the run intact", async () => {
    const { scope, calls, model } = await suspendOnA(`return await tools.slow_lookup({ key: "k" });`);
    const unknown = await waitFor(B(), { scope, runId: "cm_nope" });
    expect(unknown.model).toMatchObject({ status: "failed", code: "invalid_input", error: "code mode run is unavailable or expired." });
    expect(unknown.result.refusal).toBe(Refusal.RUN_UNAVAILABLE);
    const missing = await waitFor(B(), { scope, runId: "" });
    expect(missing.model).toMatchObject({ status: "failed", code: "invalid_input" });
    expect(missing.result.refusal).toBe(Refusal.MISSING_RUN_ID);

    // Other scopes with runs of their own (Exec and Wait need an open run).
    const otherSession = { ...scope, sessionId: `${scope.sessionId}-other` };
    const otherRun = { ...scope, agentRunId: `${scope.agentRunId}-other` };
    for (const s of [otherSession, otherRun]) await cluster.control.openRun({ scope: s, catalog: { case: "tools", value: { tools: [] } } });
    const wrong = await waitFor(B(), { scope: otherSession, runId: model.runId! });
    expect(wrong.model).toMatchObject({ status: "failed", code: "invalid_input", error: "code mode run belongs to a different session." });
    expect(wrong.result.refusal).toBe(Refusal.OTHER_SESSION);
    const wrongRun = await waitFor(B(), { scope: otherRun, runId: model.runId! });
    expect(wrongRun.model).toMatchObject({ status: "failed", code: "invalid_input", error: "code mode run belongs to a different agent run." });
    expect(wrongRun.result.refusal).toBe(Refusal.OTHER_AGENT_RUN);

    // Another scope cannot answer the run's call either.
    expect(await errorCode(answer(B(), otherSession, calls[0]!.callId, 1))).toBe("permission_denied");
    await answer(B(), scope, calls[0]!.callId, "ok");
    expect(await errorCode(answer(A(), scope, calls[0]!.callId, "again"))).toBe("already_exists");
    const done = await waitFor(A(), { scope, runId: model.runId! });
    expect(done.model).toMatchObject({ status: "completed", value: "ok" });
    // The run settled: a late answer for a call it never got is explained.
    expect(await errorCode(answer(B(), scope, "c_never_made", 1))).toBe("not_found");
  });

  it("allows one wait in flight per run", async () => {
    const { scope, calls, model } = await suspendOnA(`return await tools.slow_lookup({ key: "k" });`, { timeoutMs: 3000 });
    expect(model.status).toBe("waiting");
    const isClaimed = claimed(model.runId!);
    const first = waitFor(A(), { scope, runId: model.runId! });
    // The first wait claims the run at once, then holds the claim while it waits for an answer (up to 3 s).
    await isClaimed;
    const second = await waitFor(B(), { scope, runId: model.runId! });
    expect(second.model).toMatchObject({ status: "failed", code: "invalid_input", error: "a wait is already in flight for this code mode run." });
    expect(second.result.refusal).toBe(Refusal.WAIT_IN_FLIGHT);
    await answer(B(), scope, calls[0]!.callId, 7);
    expect((await first).model).toMatchObject({ status: "completed", value: 7 });
  });

  it("drops a run whose snapshot expired", async () => {
    const { scope, calls, model } = await suspendOnA(`return await tools.slow_lookup({ key: "k" });`, { snapshotTtlSeconds: 1 });
    expect(model.status).toBe("waiting");
    await new Promise((r) => setTimeout(r, 1600));
    const late = await waitFor(B(), { scope, runId: model.runId! });
    expect(late.model).toMatchObject({ status: "failed", code: "invalid_input", error: "code mode run is unavailable or expired." });
    expect(await errorCode(answer(B(), scope, calls[0]!.callId, 1))).toBe("failed_precondition");
  });

  it("deletes the run when the resumed segment fails, times out, or its wait is aborted, and when the gateway closes the run", async () => {
    const failing = await suspendOnA(`await yield_control(); throw new TypeError("boom");`);
    const failed = await waitFor(B(), { scope: failing.scope, runId: failing.model.runId! });
    expect(failed.model.status).toBe("failed");
    expect(failed.model.error).toMatch(/^TypeError: boom \(line 1, column \d+\)$/);
    expect((await waitFor(A(), { scope: failing.scope, runId: failing.model.runId! })).model.error).toBe("code mode run is unavailable or expired.");

    const looping = await suspendOnA(`await yield_control(); for (;;) {}`);
    const timedOut = await waitFor(B(), { scope: looping.scope, runId: looping.model.runId! });
    expect(timedOut.model).toMatchObject({ status: "failed", code: "timeout" });
    expect((await waitFor(A(), { scope: looping.scope, runId: looping.model.runId! })).model.error).toBe("code mode run is unavailable or expired.");

    const aborted = await suspendOnA(`return await tools.slow_lookup({ key: "k" });`, { timeoutMs: 5000 });
    const ac = new AbortController();
    const abortedClaimed = claimed(aborted.model.runId!);
    const gone = waitFor(B(), { scope: aborted.scope, runId: aborted.model.runId!, signal: ac.signal }).catch((err: unknown) => err);
    await abortedClaimed;
    ac.abort();
    await gone;
    // The aborted wait lets its claim go as it winds down: ask until it has.
    const after = await until(async () => {
      const w = await waitFor(A(), { scope: aborted.scope, runId: aborted.model.runId! });
      return w.model.error !== "a wait is already in flight for this code mode run." && w;
    }, "the aborted wait to release its claim");
    expect(after.model.error).toBe("code mode run is unavailable or expired.");

    const closed = await suspendOnA(`await yield_control(); return 1;`);
    const res = await cluster.control.closeRun({ scope: closed.scope });
    expect(res.suspendedRunsDeleted).toBe(1);
    // The scope has no open run any more: a wait on it is refused before any lookup.
    await expect(waitFor(B(), { scope: closed.scope, runId: closed.model.runId! })).rejects.toMatchObject({
      code: "failed_precondition",
      message: "no run is open for this scope; call OpenRun first",
    });
  });

  it("enforces maxSnapshotBytes before storing", async () => {
    const { model } = await suspendOnA(`return await tools.slow_lookup({ key: "k" });`, { maxSnapshotBytes: 1024 });
    expect(model).toMatchObject({ status: "failed", code: "snapshot_limit_exceeded" });
    expect(model.error).toMatch(/over maxSnapshotBytes \(1024 bytes\)/);
  });

  it("keeps the output budget across segments", async () => {
    const { scope, model } = await suspendOnA(`text("x".repeat(700)); await yield_control(); text("y".repeat(700)); return 1;`, { maxOutputBytes: 1024 });
    expect(model.status).toBe("waiting");
    const over = await waitFor(B(), { scope, runId: model.runId! });
    expect(over.model).toMatchObject({ status: "failed", code: "output_limit_exceeded" });
  });
});

describe("snapshot authentication and the suspended-run cap", () => {
  it("rotates snapshot keys: a sidecar listing the old key resumes old runs and seals under the new one; one without a run's key refuses it and leaves it", async () => {
    // The cluster's sidecars have the single CODEMODE_SNAPSHOT_KEY; this one seals under
    // k2 and still reads the cluster's key (listed bare: the same derived id).
    const rotated = await spawnCodemode(["sandbox", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", cluster.linkAddress, "--threads", "1"], {
      CODEMODE_SNAPSHOT_KEYS: `k2:rotated-snapshot-key-0123456789abcdef0123, ${SHARED_SNAPSHOT_KEY}`,
    });
    const { createClient } = await import("../../src/protocol/grpc-client.js");
    const { Sandbox } = await import("../../src/gen/codemode/sandbox/v1/sandbox_pb.js");
    const R = createClient(Sandbox, rotated.ready.sandbox!);
    try {
      const { scope, model } = await suspendOnA(`await yield_control(); text("second segment"); await yield_control(); return "done";`);
      const resumed = await waitFor(R, { scope, runId: model.runId! });
      expect(resumed.model).toMatchObject({ status: "waiting", runId: model.runId, reason: "yield", output: [{ type: "text", text: "second segment" }] });
      // Sealed under k2 now: A does not have that key. Refused, not deleted.
      const refused = await waitFor(A(), { scope, runId: model.runId! });
      expect(refused.model).toMatchObject({ status: "failed", code: "runtime_unavailable" });
      expect(refused.model.error).toMatch(/sealed under key id "k2", which is not among this sidecar's snapshot keys .*the run is kept/);
      await logged(cluster.sidecars[0]!.proc, /snapshot key this sidecar does not have; leaving it/);
      expect((await waitFor(R, { scope, runId: model.runId! })).model).toMatchObject({ status: "completed", value: "done" });
    } finally {
      R.close();
      expect(await rotated.stop()).toBe(0);
    }
  });

  it("refuses suspensions past --max-suspended-runs with the seed's message, and frees slots as runs settle", async () => {
    const held = [];
    let refused;
    for (let i = 0; i < 8 && !refused; i++) {
      const s = await suspendOnA(`await yield_control(); return ${i};`);
      if (s.model.status === "waiting") held.push(s);
      else refused = s;
    }
    expect(refused?.model).toMatchObject({ status: "failed", code: "invalid_input", error: "too many suspended code mode runs." });
    expect(refused?.result.refusal).toBe(Refusal.TOO_MANY_SUSPENDED);
    expect(held.length).toBeLessThanOrEqual(6);
    const first = held.shift()!;
    expect((await waitFor(B(), { scope: first.scope, runId: first.model.runId! })).model.status).toBe("completed");
    const again = await suspendOnA(`await yield_control(); return "fits";`);
    expect(again.model.status).toBe("waiting");
    for (const s of [...held, again]) await cluster.control.closeRun({ scope: s.scope });
  });
});

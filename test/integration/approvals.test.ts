/**
 * Approvals inside a program, against real processes (an orchestrator and two sidecars on
 * the in-memory store, and one on Redis): a gateway answers a nested call "approval
 * pending"; the exec returns `waiting` with reason `approval` and the call marked; a
 * decision sent to another sidecar is resumed there by `wait`. Denied and expired calls are
 * catchable errors in the guest; time spent waiting for a person is not running time; with
 * approvalMode "error" the guest gets ApprovalRequired at once. Misuse (an unknown call, a
 * second mark or decision, a decision after the expiry, another scope's call, a past
 * expiry) gets the same precise statuses as BridgeCallback misuse.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WaitReason } from "../../src/gen/codemode/common/v1/common_pb.js";
import { openRun, type TestTool } from "../helpers/gateway.js";
import { collectStream, startCluster, waitFor, type Cluster, type ExecOutcome, type ToolCallEvent } from "../helpers/harness.js";
import { startRedis, type RedisServer } from "../helpers/redis.js";

let cluster: Cluster;
beforeAll(async () => {
  cluster = await startCluster({ sidecars: 2 });
});
afterAll(async () => {
  expect(await cluster.stop()).toEqual([0, 0, 0]);
});

const TOOLS: TestTool[] = [
  { name: "deploy", description: "Deploy a service (needs a person's approval)", parameters: { type: "object" } },
  { name: "lookup", description: "Look something up", parameters: { type: "object" } },
];

type Sandbox = Cluster["sidecars"][number]["sandbox"];
type Scope = Awaited<ReturnType<typeof openRun>>["scope"];

const pending = (reason: string, expiresAtMs = 0) => ({ case: "approvalPending" as const, value: { reason, expiresAtMs: BigInt(expiresAtMs) } });
const result = (value: unknown) => ({ case: "resultJson" as const, value: JSON.stringify(value) });
const denied = (message: string) => ({ case: "approvalDenied" as const, value: { message } });

/**
 * Runs an exec on `sandbox`, answering `deploy` approval-pending (with `reason`) and
 * `lookup` with its input; returns the outcome and the deploy calls it saw.
 */
async function execAsking(sandbox: Sandbox, scope: Scope, code: string, reason = "deploys to production", expiresAtMs = 0) {
  const asked: ToolCallEvent[] = [];
  const out = await collectStream(sandbox.exec({ scope, execCallId: `x-${Date.now()}`, code }), (call) => {
    if (call.toolName === "deploy") {
      asked.push(call);
      void sandbox.bridgeCallback({ scope, callId: call.callId, outcome: pending(reason, expiresAtMs) });
    } else void sandbox.bridgeCallback({ scope, callId: call.callId, outcome: { case: "resultJson", value: call.inputJson } });
  });
  return { ...out, asked };
}

const a = () => cluster.sidecars[0]!.sandbox;
const b = () => cluster.sidecars[1]!.sandbox;

function expectWaitingForApproval(out: ExecOutcome, callIds: string[], reason: string) {
  expect(out.model).toMatchObject({ status: "waiting", reason: "approval" });
  expect(out.result.reason).toBe(WaitReason.APPROVAL);
  expect(out.result.pendingToolCalls.map((p) => [p.callId, p.awaitingApproval, p.approvalReason])).toEqual(callIds.map((id) => [id, true, reason]));
  expect(out.model.pendingToolCalls).toEqual(
    callIds.map((id) => ({ id, toolId: "openclaw:core:deploy", name: "deploy", awaitingApproval: true, approvalReason: reason })),
  );
  expect((out.model as unknown as { approval: string }).approval).toMatch(
    /^A person is being asked to approve .*\(deploy\)\. Tell the user .*do not call the tool again\. Call wait /,
  );
}

describe("approval pending", () => {
  it("the exec returns waiting (reason approval) at once; approved on another sidecar, wait completes with the tool's result", async () => {
    const { scope } = await openRun(cluster, TOOLS);
    const t0 = Date.now();
    const out = await execAsking(a(), scope, "const r = await tools.deploy({ service: 'api' }); return { deployed: r }");
    // Nothing else to do: it does not sit out timeoutMs (10 s by default).
    expect(Date.now() - t0).toBeLessThan(9_000);
    const callId = out.asked[0]!.callId;
    expectWaitingForApproval(out, [callId], "deploys to production");
    expect(out.result.telemetry?.approvals.map((x) => [x.callId, x.decision, x.reason])).toEqual([[callId, "pending", "deploys to production"]]);

    // The person says yes: the gateway runs the tool and answers on another sidecar.
    expect((await b().bridgeCallback({ scope, callId, outcome: result({ version: 7 }) })).deliveredLive).toBe(false);
    const done = await waitFor(b(), { scope, runId: out.model.runId! });
    expect(done.model).toMatchObject({ status: "completed", value: { deployed: { version: 7 } } });
    expect(done.result.telemetry?.approvals.map((x) => [x.callId, x.decision])).toEqual([[callId, "approved"]]);
    const decided = done.result.telemetry!.approvals[0]!;
    expect(Number(decided.decidedAtMs)).toBeGreaterThanOrEqual(Number(decided.requestedAtMs));

    // The trajectory records the request and the decision.
    const steps = (await cluster.control.getTrajectory({ scope })).steps;
    const nested = steps.flatMap((s) => s.nestedCalls).find((c) => c.callId === callId)!;
    // The exec's step, updated by the wait that delivered the decision.
    expect([nested.approval, nested.approvalReason]).toEqual(["approved", "deploys to production"]);
    expect(Number(nested.approvalDecidedAtMs)).toBeGreaterThanOrEqual(Number(nested.approvalRequestedAtMs));
    expect(done.result.telemetry?.approvals[0]?.reason).toBe("deploys to production");
  });

  it("denied: the program catches ApprovalDenied with the gateway's message and completes", async () => {
    const { scope } = await openRun(cluster, TOOLS);
    const out = await execAsking(a(), scope, "try { await tools.deploy({}); return 'deployed' } catch (e) { return [e instanceof Error, e.name, e.message] }");
    const callId = out.asked[0]!.callId;
    expectWaitingForApproval(out, [callId], "deploys to production");
    await b().bridgeCallback({ scope, callId, outcome: denied("not on a Friday") });
    const done = await waitFor(a(), { scope, runId: out.model.runId! });
    expect(done.model).toMatchObject({ status: "completed", value: [true, "ApprovalDenied", "not on a Friday"] });
    expect(done.result.telemetry?.approvals.map((x) => x.decision)).toEqual(["denied"]);
  });

  it("a decision that comes while the program still runs is delivered live, in the same exec", async () => {
    const { scope } = await openRun(cluster, TOOLS);
    // The program has other work (a timer) before the deadline, so it does not suspend.
    const out = await collectStream(
      a().exec({ scope, code: "const p = tools.deploy({}); await new Promise((r) => setTimeout(r, 300)); return await p" }),
      (call) => {
        void (async () => {
          await a().bridgeCallback({ scope, callId: call.callId, outcome: pending("asking") });
          await b().bridgeCallback({ scope, callId: call.callId, outcome: result("ok") });
        })();
      },
    );
    expect(out.model).toMatchObject({ status: "completed", value: "ok" });
    expect(out.result.telemetry?.approvals.map((x) => x.decision)).toEqual(["approved"]);
  });

  it("expiry: a live call whose approval runs out gets ApprovalExpired; a later decision is FAILED_PRECONDITION", async () => {
    const { scope } = await openRun(cluster, TOOLS);
    let callId = "";
    const out = await collectStream(
      a().exec({
        scope,
        code: "const p = tools.deploy({}).catch((e) => [e.name, e.message]); await new Promise((r) => setTimeout(r, 3000)); return await p",
      }),
      (call) => {
        callId = call.callId;
        void a().bridgeCallback({ scope, callId, outcome: pending("", Date.now() + 1_200) });
      },
    );
    expect(out.model).toMatchObject({
      status: "completed",
      value: ["ApprovalExpired", expect.stringMatching(/^no decision came within 1 s for the approval of deploy\.$/)],
    });
    expect(out.result.telemetry?.approvals.map((x) => x.decision)).toEqual(["expired"]);
    await expect(a().bridgeCallback({ scope, callId, outcome: result("late") })).rejects.toMatchObject({ code: "failed_precondition" });
  });

  it("expiry while suspended: a wait after it tells the program ApprovalExpired; a decision after it is FAILED_PRECONDITION", async () => {
    const { scope } = await openRun(cluster, TOOLS);
    const out = await execAsking(a(), scope, "try { return await tools.deploy({}) } catch (e) { return e.name }", "r", Date.now() + 1_000);
    const callId = out.asked[0]!.callId;
    expect(Number(out.result.pendingToolCalls[0]!.approvalExpiresAtMs)).toBeGreaterThan(Date.now() - 1_000);
    // A wait before the expiry polls until it, then resumes with the expiry.
    const done = await waitFor(b(), { scope, runId: out.model.runId! });
    expect(done.model).toMatchObject({ status: "completed", value: "ApprovalExpired" });
    await expect(b().bridgeCallback({ scope, callId, outcome: result("late") })).rejects.toMatchObject({ code: "failed_precondition" });
  });

  it("the budget pause: timeoutMs 500, a call that waits 2 s for approval, then the whole running budget after it", async () => {
    const { scope } = await openRun(cluster, TOOLS, {}, { config: { timeoutMs: 500 } });
    const code = "const r = await tools.deploy({}); const t = Date.now(); while (Date.now() - t < 250) {} return r";
    const out = await execAsking(a(), scope, code);
    expectWaitingForApproval(out, [out.asked[0]!.callId], "deploys to production");
    await new Promise((r) => setTimeout(r, 2_000));
    await b().bridgeCallback({ scope, callId: out.asked[0]!.callId, outcome: result("shipped") });
    const done = await waitFor(b(), { scope, runId: out.model.runId! });
    expect(done.model).toMatchObject({ status: "completed", value: "shipped" });
  });

  it('approvalMode "error": the call fails at once in the guest with ApprovalRequired carrying the reason; nothing suspends', async () => {
    const { scope } = await openRun(cluster, TOOLS, {}, { config: { approvalMode: "error" } });
    const out = await execAsking(a(), scope, "try { await tools.deploy({}); return 'no' } catch (e) { return [e.name, e.message] }", "prod change");
    expect(out.model).toMatchObject({ status: "completed", value: ["ApprovalRequired", "deploy needs a person's approval: prod change"] });
    expect(out.result.telemetry?.approvals.map((x) => x.decision)).toEqual(["required"]);
    // The call is settled: a decision now is a second answer.
    await expect(a().bridgeCallback({ scope, callId: out.asked[0]!.callId, outcome: result(1) })).rejects.toMatchObject({ code: "already_exists" });
  });

  it("two calls in parallel, one approved and one denied", async () => {
    const { scope } = await openRun(cluster, TOOLS);
    const out = await execAsking(
      a(),
      scope,
      "const rs = await Promise.allSettled([tools.deploy({ n: 1 }), tools.deploy({ n: 2 })]); return rs.map((r) => r.status === 'fulfilled' ? r.value : r.reason.name)",
    );
    const [first, second] = out.asked.map((c) => c.callId);
    expectWaitingForApproval(out, [first!, second!], "deploys to production");
    await b().bridgeCallback({ scope, callId: first!, outcome: result("one") });
    // A wait with one decision in resumes, and suspends again for the other.
    const mid = await waitFor(a(), { scope, runId: out.model.runId! });
    expectWaitingForApproval(mid, [second!], "deploys to production");
    await a().bridgeCallback({ scope, callId: second!, outcome: denied("no") });
    const done = await waitFor(b(), { scope, runId: out.model.runId! });
    expect(done.model).toMatchObject({ status: "completed", value: ["one", "ApprovalDenied"] });
  });

  it("a plain call and an approval: the run waits on the answer, then suspends for the person only", async () => {
    const { scope } = await openRun(cluster, TOOLS);
    const out = await execAsking(a(), scope, "const [x, y] = await Promise.all([tools.lookup({ q: 1 }), tools.deploy({})]); return [x, y]");
    expectWaitingForApproval(out, [out.asked[0]!.callId], "deploys to production");
  });

  it("a decision sent right behind its approval-pending answer is taken live: the exec completes, no waiting", async () => {
    const { scope } = await openRun(cluster, TOOLS);
    const s = a().execSession();
    s.send({ message: { case: "exec", value: { scope, code: "return await tools.deploy({})" } } });
    let model: Record<string, unknown> = {};
    let approvals: string[] = [];
    for await (const ev of s.messages) {
      if (ev.event.case === "toolCall") {
        const callId = ev.event.value.callId;
        s.send({ message: { case: "answer", value: { callId, outcome: pending("auto-approved") } } });
        s.send({ message: { case: "answer", value: { callId, outcome: result("at once") } } });
      }
      if (ev.event.case === "result") {
        model = JSON.parse(ev.event.value.modelJson) as Record<string, unknown>;
        approvals = ev.event.value.telemetry?.approvals.map((x) => x.decision) ?? [];
        s.end();
      }
    }
    expect(model).toMatchObject({ status: "completed", value: "at once" });
    expect(approvals).toEqual(["approved"]);
  });

  it("on ExecSession: approval pending and the decision travel on the streams", async () => {
    const { scope } = await openRun(cluster, TOOLS);
    const s = a().execSession();
    s.send({ message: { case: "exec", value: { scope, code: "return await tools.deploy({})" } } });
    let callId = "";
    let runId = "";
    for await (const ev of s.messages) {
      if (ev.event.case === "toolCall") {
        callId = ev.event.value.callId;
        s.send({ message: { case: "answer", value: { callId, outcome: pending("on the stream") } } });
      }
      if (ev.event.case === "result") {
        expect(ev.event.value.reason).toBe(WaitReason.APPROVAL);
        runId = ev.event.value.codeModeRunId;
        s.end();
      }
    }
    const w = b().execSession();
    w.send({ message: { case: "wait", value: { scope, codeModeRunId: runId } } });
    w.send({ message: { case: "answer", value: { scope, callId, outcome: result("streamed") } } });
    let model: Record<string, unknown> = {};
    for await (const ev of w.messages) {
      if (ev.event.case === "result") {
        model = JSON.parse(ev.event.value.modelJson) as Record<string, unknown>;
        w.end();
      }
    }
    expect(model).toMatchObject({ status: "completed", value: "streamed" });
  });
});

describe("misuse gets precise statuses", () => {
  it("an unknown call, another scope's call, a second mark, a second decision, a past expiry", async () => {
    const { scope } = await openRun(cluster, TOOLS);
    const other = (await openRun(cluster, TOOLS)).scope;
    await expect(a().bridgeCallback({ scope, callId: "c_nobody", outcome: pending("x") })).rejects.toMatchObject({ code: "not_found" });
    const out = await execAsking(a(), scope, "return await tools.deploy({})");
    const callId = out.asked[0]!.callId;
    await expect(b().bridgeCallback({ scope: other, callId, outcome: result(1) })).rejects.toMatchObject({ code: "permission_denied" });
    await expect(b().bridgeCallback({ scope, callId, outcome: pending("again") })).rejects.toMatchObject({ code: "already_exists" });
    await expect(b().bridgeCallback({ scope, callId, outcome: pending("x", Date.now() - 1) })).rejects.toMatchObject({ code: "invalid_argument" });
    await b().bridgeCallback({ scope, callId, outcome: result(1) });
    await expect(a().bridgeCallback({ scope, callId, outcome: denied("too late") })).rejects.toMatchObject({ code: "already_exists" });
  });

  it("a second mark on a live call is ALREADY_EXISTS; an expiry above approvalTimeoutMs is clamped, not refused", async () => {
    const { scope } = await openRun(cluster, TOOLS, {}, { config: { approvalTimeoutMs: 5_000 } });
    const statuses: string[] = [];
    const out = await collectStream(a().exec({ scope, code: "return await tools.deploy({})" }), (call) => {
      void (async () => {
        await a().bridgeCallback({ scope, callId: call.callId, outcome: pending("far", Date.now() + 3_600_000) });
        await a()
          .bridgeCallback({ scope, callId: call.callId, outcome: pending("twice") })
          .catch((err: { code: string }) => statuses.push(err.code));
      })();
    });
    expect(out.model).toMatchObject({ status: "waiting", reason: "approval" });
    const expiresAt = Number(out.result.pendingToolCalls[0]!.approvalExpiresAtMs);
    expect(expiresAt).toBeLessThanOrEqual(Date.now() + 5_000);
    expect(expiresAt).toBeGreaterThan(Date.now());
    await expect(b().bridgeCallback({ scope, callId: out.result.pendingToolCalls[0]!.callId, outcome: pending("again") })).rejects.toMatchObject({
      code: "already_exists",
    });
    expect(statuses.every((c) => c === "already_exists")).toBe(true);
  });
});

describe("approvals with the Redis store", () => {
  let redis: RedisServer;
  let rc: Cluster;
  beforeAll(async () => {
    redis = await startRedis();
    rc = await startCluster({ sidecars: 2, orchestratorArgs: ["--store", redis.url] });
  });
  afterAll(async () => {
    await rc?.stop();
    await redis?.stop();
  });

  it("a mark sent after the run suspended, a decision, a wait on the other sidecar; an expired one refused", async () => {
    const { scope } = await openRun(rc, TOOLS, {}, { config: { timeoutMs: 300 } });
    let callId = "";
    const out = await collectStream(rc.sidecars[0]!.sandbox.exec({ scope, code: "try { return await tools.deploy({}) } catch (e) { return e.name }" }), (c) => {
      callId = c.callId;
    });
    // Unanswered at the deadline: pending_tools. The gateway then says a person is asked.
    expect(out.model).toMatchObject({ status: "waiting", reason: "pending_tools" });
    await rc.sidecars[1]!.sandbox.bridgeCallback({ scope, callId, outcome: pending("later", Date.now() + 60_000) });
    await expect(rc.sidecars[0]!.sandbox.bridgeCallback({ scope, callId, outcome: pending("again") })).rejects.toMatchObject({ code: "already_exists" });
    const still = await waitFor(rc.sidecars[1]!.sandbox, { scope, runId: out.model.runId! });
    expect(still.model).toMatchObject({
      status: "waiting",
      reason: "approval",
      pendingToolCalls: [{ id: callId, awaitingApproval: true, approvalReason: "later" }],
    });
    await rc.sidecars[0]!.sandbox.bridgeCallback({ scope, callId, outcome: result("yes") });
    const done = await waitFor(rc.sidecars[1]!.sandbox, { scope, runId: out.model.runId! });
    expect(done.model).toMatchObject({ status: "completed", value: "yes" });
    expect(done.result.telemetry?.approvals.map((x) => x.decision)).toEqual(["approved"]);

    // An approval that expires while suspended: a decision after it is refused, and the program hears ApprovalExpired.
    const second = await execAsking(
      rc.sidecars[0]!.sandbox,
      scope,
      "try { return await tools.deploy({}) } catch (e) { return e.name }",
      "r",
      Date.now() + 1_000,
    );
    await new Promise((r) => setTimeout(r, 1_300));
    await expect(rc.sidecars[1]!.sandbox.bridgeCallback({ scope, callId: second.asked[0]!.callId, outcome: result("late") })).rejects.toMatchObject({
      code: "failed_precondition",
    });
    const expired = await waitFor(rc.sidecars[1]!.sandbox, { scope, runId: second.model.runId! });
    expect(expired.model).toMatchObject({ status: "completed", value: "ApprovalExpired" });
  });
});

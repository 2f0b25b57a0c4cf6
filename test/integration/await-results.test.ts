/**
 * `awaitResults` against real processes (an orchestrator and one-thread sidecars): an exec
 * whose program waits on a slow tool stays open and completes when the answer comes, with
 * no `wait` call, while the parked VM is a snapshot in the store and the sidecar's one
 * thread serves other execs; running time is summed across the resumes and parked time is
 * not; a yield does not end the call; `maxAwaitMs` ends it with `waiting` as a plain exec
 * would; a run parked for a person's approval returns at once; answers on an ExecSession
 * stream resume it too; and the exec tool documents the input only when the run enables it.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openRun, type TestTool } from "../helpers/gateway.js";
import { collectStream, logged, startCluster, waitFor, type Cluster, type ToolCallEvent } from "../helpers/harness.js";

let cluster: Cluster;
beforeAll(async () => {
  cluster = await startCluster({ sidecars: 2 });
});
afterAll(async () => {
  expect(await cluster.stop()).toEqual([0, 0, 0]);
});

const TOOLS: TestTool[] = [
  { name: "slow", description: "answers later", parameters: { type: "object" } },
  { name: "deploy", description: "needs a person's approval", parameters: { type: "object" } },
];
const a = () => cluster.sidecars[0]!;
const b = () => cluster.sidecars[1]!;
const result = (value: unknown) => ({ case: "resultJson" as const, value: JSON.stringify(value) });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("awaitResults", () => {
  it("completes a program whose tool answers after 3 × timeoutMs, with no wait; the one thread serves another exec meanwhile", async () => {
    const { scope } = await openRun(cluster, TOOLS, {}, { config: { timeoutMs: 400 } });
    const calls: ToolCallEvent[] = [];
    const from = a().proc.stderr.length;
    const done = collectStream(
      a().sandbox.exec({ scope, execCallId: "x-await", code: "text('before'); const r = await tools.slow({}); text('after'); return r", awaitResults: true }),
      (c) => calls.push(c),
    );
    // Parked: the exec's segment ended waiting (held, not sent) and the run is in the store.
    await logged(a().proc, new RegExp(`"agentRunId":"${scope.agentRunId}".*"status":"waiting".*"msg":"exec finished"`), { from });
    const other = await collectStream(a().sandbox.exec({ scope: (await openRun(cluster, TOOLS)).scope, code: "return 2" }));
    expect(other.model).toMatchObject({ status: "completed", value: 2 });
    await sleep(1_200 - 400);
    await b().sandbox.bridgeCallback({ scope, callId: calls[0]!.callId, outcome: result({ slow: true }) });
    const out = await done;
    expect(out.model).toMatchObject({
      status: "completed",
      value: { slow: true },
      output: [
        { type: "text", text: "before" },
        { type: "text", text: "after" },
      ],
    });
    expect(out.events.filter((e) => e.event.case === "result")).toHaveLength(1);
    expect(calls).toHaveLength(1);
  });

  it("running time is summed across resumes, parked time is not", async () => {
    const { scope } = await openRun(cluster, TOOLS, {}, { config: { timeoutMs: 1_000, awaitResults: true } });
    const spin = (ms: number) => `{ const t = Date.now(); while (Date.now() - t < ${ms}) {} }`;
    const answerLater = (c: ToolCallEvent) => void sleep(2_500).then(() => b().sandbox.bridgeCallback({ scope, callId: c.callId, outcome: result("late") }));
    // 300 ms, a 2.5 s wait for the tool, 300 ms: 600 ms of running time in a 1,000 ms budget.
    const fits = await collectStream(a().sandbox.exec({ scope, code: `${spin(300)}; const r = await tools.slow({}); ${spin(300)}; return r` }), answerLater);
    expect(fits.model).toMatchObject({ status: "completed", value: "late" });
    // 600 ms before and 600 after: the resume has 400 ms left, and times out.
    const over = await collectStream(a().sandbox.exec({ scope, code: `${spin(600)}; const r = await tools.slow({}); ${spin(600)}; return r` }), answerLater);
    expect(over.model).toMatchObject({ status: "failed", code: "timeout" });
  });

  it("a yield does not end the call", async () => {
    const { scope } = await openRun(cluster, TOOLS, {}, { config: { awaitResults: true } });
    const out = await collectStream(a().sandbox.exec({ scope, code: "text('1'); await yield_control('x'); text('2'); return 'after'" }));
    expect(out.model).toMatchObject({ status: "completed", value: "after", output: [{ text: "1" }, { text: "2" }] });
  });

  it("maxAwaitMs ends it with waiting, which a wait then continues; awaitResults false returns waiting at the deadline", async () => {
    const { scope } = await openRun(cluster, TOOLS, {}, { config: { timeoutMs: 300, awaitResults: true, maxAwaitMs: 1_000 } });
    let callId = "";
    const t0 = Date.now();
    const out = await collectStream(a().sandbox.exec({ scope, code: "return await tools.slow({})" }), (c) => {
      callId = c.callId;
    });
    expect(out.model).toMatchObject({ status: "waiting", reason: "pending_tools", pendingToolCalls: [{ id: callId }] });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1_000);
    await b().sandbox.bridgeCallback({ scope, callId, outcome: result(7) });
    expect((await waitFor(b().sandbox, { scope, runId: out.model.runId! })).model).toMatchObject({ status: "completed", value: 7 });

    const plain = await collectStream(a().sandbox.exec({ scope, code: "return await tools.slow({})", awaitResults: false }));
    expect(plain.model).toMatchObject({ status: "waiting", reason: "pending_tools" });
  });

  it("a run parked for a person's approval returns at once", async () => {
    const { scope } = await openRun(cluster, TOOLS, {}, { config: { awaitResults: true } });
    const out = await collectStream(a().sandbox.exec({ scope, code: "return await tools.deploy({})" }), (c) => {
      void a().sandbox.bridgeCallback({ scope, callId: c.callId, outcome: { case: "approvalPending", value: { reason: "prod", expiresAtMs: 0n } } });
    });
    expect(out.model).toMatchObject({ status: "waiting", reason: "approval" });
  });

  it("on ExecSession: an answer on the stream resumes the parked program in the same call", async () => {
    const { scope } = await openRun(cluster, TOOLS, {}, { config: { timeoutMs: 300 } });
    const s = a().sandbox.execSession();
    s.send({ message: { case: "exec", value: { scope, code: "return await tools.slow({ n: 1 })", awaitResults: true } } });
    let model: Record<string, unknown> = {};
    for await (const ev of s.messages) {
      if (ev.event.case === "toolCall") {
        const callId = ev.event.value.callId;
        void sleep(900).then(() => s.send({ message: { case: "answer", value: { callId, outcome: result("streamed") } } }));
      }
      if (ev.event.case === "result") {
        model = JSON.parse(ev.event.value.modelJson) as Record<string, unknown>;
        s.end();
      }
    }
    expect(model).toMatchObject({ status: "completed", value: "streamed" });
  });

  it("the exec tool offers awaitResults only when the run enables it", async () => {
    const on = await openRun(cluster, TOOLS, {}, { config: { awaitResults: true } });
    const off = await openRun(cluster, TOOLS);
    const exec = async (scope: typeof on.scope) => (await cluster.control.describeSurface({ scope })).surface!.tools.find((t) => t.name === "exec")!;
    const withIt = await exec(on.scope);
    expect(withIt.description).toMatch(/awaitResults: true/);
    expect(JSON.parse(withIt.inputSchemaJson).properties.awaitResults).toMatchObject({ type: "boolean" });
    const without = await exec(off.scope);
    expect(without.description).not.toMatch(/awaitResults/);
    expect(JSON.parse(without.inputSchemaJson).properties.awaitResults).toBeUndefined();
  });
});

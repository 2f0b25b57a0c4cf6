/**
 * Drain on SIGTERM, through a real `codemode start`: health goes NOT_SERVING at once on
 * both ports, a new Exec is UNAVAILABLE, Control keeps serving, tool answers for runs in
 * flight are accepted and those runs complete, a suspended run can still be waited on,
 * and the process exits 0 within the budget (it logs that everything finished, never that
 * the budget ran out). When the budget runs out, and only then (the sidecar logs it before
 * it suspends anything), a run whose VM is idle (awaiting a tool) is suspended into the
 * store and returned as `waiting` (with a shared Redis store, another sidecar continues
 * it), a guest still computing is cancelled with a `failed` result, and the process still
 * exits 0.
 */
import { once } from "node:events";
import { describe, expect, it } from "vitest";
import { healthClient } from "../helpers/health-client.js";
import { openRun, type TestTool } from "../helpers/gateway.js";
import { Control } from "../../src/gen/codemode/orchestrator/v1/control_pb.js";
import { Sandbox } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { createClient } from "../../src/protocol/grpc-client.js";
import {
  collectStream,
  execute,
  lineIndex,
  logged,
  SHARED_SNAPSHOT_KEY,
  spawnCodemode,
  startExec,
  startStack,
  waitFor,
  type ToolCallEvent,
} from "../helpers/harness.js";
import { startRedis } from "../helpers/redis.js";

const TOOLS: TestTool[] = [{ name: "slow_lookup", description: "Answers when the gateway gets round to it", parameters: { type: "object" } }];

/** Starts an exec that makes one tool call; resolves the call once it reached the gateway. */
function execWithPendingCall(stack: Awaited<ReturnType<typeof startStack>>, scope: Awaited<ReturnType<typeof openRun>>["scope"], code: string) {
  let announce!: (c: ToolCallEvent) => void;
  const call = new Promise<ToolCallEvent>((r) => (announce = r));
  const done = execute(stack, { scope, code, config: { timeoutMs: 30_000 } }, (c) => announce(c));
  return { call, done };
}

describe("SIGTERM drains", () => {
  it("NOT_SERVING at once, new execs refused, in-flight runs finish with answers given after the signal, exit 0 within the budget", async () => {
    const budgetMs = 20_000;
    const stack = await startStack(["--drain-timeout-ms", String(budgetMs)]);
    const sideHealth = healthClient(stack.sandboxAddress);
    const orchHealth = healthClient(stack.orchestratorAddress);
    try {
      await sideHealth.until("", "SERVING");
      // A run suspended before the signal, to be waited on during the drain.
      const yielded = await openRun(stack, TOOLS);
      const suspended = await execute(stack, { scope: yielded.scope, code: `await yield_control("later"); return "resumed during drain"` });
      expect(suspended.model.status).toBe("waiting");
      // Two runs in flight, each waiting on a tool the gateway answers only after the signal.
      const runs = await Promise.all([openRun(stack, TOOLS), openRun(stack, TOOLS)]);
      const inflight = runs.map(({ scope }, i) => ({
        scope,
        ...execWithPendingCall(stack, scope, `const r = await tools.slow_lookup({ i: ${i} }); return "run ${i} got " + r;`),
      }));
      const calls = await Promise.all(inflight.map((r) => r.call));

      const exited = once(stack.proc.child, "exit") as Promise<[number | null]>;
      stack.proc.child.kill("SIGTERM");

      await sideHealth.until("", "NOT_SERVING", 5_000);
      expect(await sideHealth.check("codemode.sandbox.v1.Sandbox")).toBe("NOT_SERVING");
      await orchHealth.until("", "NOT_SERVING", 5_000);
      expect(await orchHealth.check("codemode.orchestrator.v1.Control")).toBe("NOT_SERVING");

      // A new exec is refused; Control still answers, so the gateway can tell what happened.
      const fresh = await openRun(stack, TOOLS);
      await expect(collectStream(stack.sandbox.exec({ scope: fresh.scope, code: "return 1" }))).rejects.toMatchObject({
        code: "unavailable",
        message: expect.stringContaining("this sidecar is draining"),
      });
      expect((await stack.control.describeSurface({ scope: fresh.scope })).surface?.codeModeActive).toBe(true);

      // Waits and tool answers are accepted.
      const resumed = await waitFor(stack.sandbox, { scope: yielded.scope, runId: suspended.model.runId! });
      expect(resumed.model).toMatchObject({ status: "completed", value: "resumed during drain" });
      for (const [i, c] of calls.entries()) {
        const res = await stack.sandbox.bridgeCallback({
          scope: inflight[i]!.scope,
          callId: c.callId,
          outcome: { case: "resultJson", value: JSON.stringify(`answer ${i}`) },
        });
        expect(res.deliveredLive).toBe(true);
      }
      const finished = await Promise.all(inflight.map((r) => r.done));
      expect(finished.map((f) => f.model)).toMatchObject([
        { status: "completed", value: "run 0 got answer 0" },
        { status: "completed", value: "run 1 got answer 1" },
      ]);

      const [code] = await exited;
      expect(code).toBe(0);
      await logged(stack.proc, /draining: health NOT_SERVING, new execs refused/);
      // Within the budget: the sidecar saw nothing left in flight before it ran out, and
      // neither process logged running out (their last line, "orchestrator stopped", is in).
      await logged(stack.proc, /drained: every call in flight finished within the budget/);
      await logged(stack.proc, /"msg":"orchestrator stopped"/);
      expect(stack.proc.stderr.filter((l) => l.includes("drain budget ran out"))).toEqual([]);
    } finally {
      sideHealth.close();
      orchHealth.close();
      await stack.stop();
    }
  });

  it("when the budget runs out, an idle run is suspended as waiting, a computing one is cancelled, and the process exits 0", async () => {
    const budgetMs = 1_500;
    const stack = await startStack(["--drain-timeout-ms", String(budgetMs)]);
    try {
      const { scope } = await openRun(stack, TOOLS);
      const idle = execWithPendingCall(stack, scope, `return await tools.slow_lookup({});`);
      await idle.call;
      const busy = startExec(stack.sandbox, { scope, code: `text("computing"); for (;;) {}`, config: { timeoutMs: 30_000 } });
      await busy.running;
      const exited = once(stack.proc.child, "exit") as Promise<[number | null]>;
      stack.proc.child.kill("SIGTERM");
      const [idleOut, busyOut] = await Promise.all([idle.done, busy.done]);
      expect(idleOut.model).toMatchObject({ status: "waiting", reason: "pending_tools" });
      expect(busyOut.model.status).toBe("failed");
      expect(busyOut.model.error).toMatch(/drain budget ran out/);
      const [code] = await exited;
      expect(code).toBe(0);
      // The idle run was suspended because the budget ran out, not before: the sidecar
      // logged running out before either run finished.
      await logged(stack.proc, /"msg":"orchestrator stopped"/);
      const ranOut = lineIndex(stack.proc, /drain budget ran out; cancelling what is still running/);
      const finished = lineIndex(stack.proc, new RegExp(`"agentRunId":"${scope.agentRunId}".*"msg":"exec finished"`));
      expect(ranOut).toBeGreaterThan(-1);
      expect(finished).toBeGreaterThan(ranOut);
    } finally {
      await stack.stop();
    }
  });

  it("with a shared Redis store, a run suspended by a draining sidecar is continued by another", async () => {
    const redis = await startRedis();
    const orchestrator = await spawnCodemode(["orchestrator", "--orchestrator-address", "127.0.0.1:0", "--link-address", "127.0.0.1:0", "--store", redis.url]);
    const env = { CODEMODE_SNAPSHOT_KEY: SHARED_SNAPSHOT_KEY };
    const sidecarArgs = ["sandbox", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", orchestrator.ready.link!];
    const a = await spawnCodemode([...sidecarArgs, "--drain-timeout-ms", "1000"], env);
    const b = await spawnCodemode(sidecarArgs, env);
    const control = createClient(Control, orchestrator.ready.orchestrator!);
    const onA = createClient(Sandbox, a.ready.sandbox!);
    const onB = createClient(Sandbox, b.ready.sandbox!);
    try {
      const { scope } = await openRun({ control }, TOOLS);
      let announce!: (callId: string) => void;
      const called = new Promise<string>((r) => (announce = r));
      const execP = collectStream(
        onA.exec({ scope, code: `text("before"); const r = await tools.slow_lookup({}); return "got " + r`, config: { timeoutMs: 30_000 } }),
        (c) => announce(c.callId),
      );
      const callId = await called;
      const exited = once(a.child, "exit") as Promise<[number | null]>;
      a.child.kill("SIGTERM");
      const first = await execP;
      expect(first.model).toMatchObject({ status: "waiting", output: [{ type: "text", text: "before" }] });
      expect((await exited)[0]).toBe(0);
      // The gateway answers on the surviving sidecar and waits there.
      await onB.bridgeCallback({ scope, callId, outcome: { case: "resultJson", value: '"it"' } });
      const done = await waitFor(onB, { scope, runId: first.model.runId! });
      expect(done.model).toMatchObject({ status: "completed", value: "got it" });
    } finally {
      control.close();
      onA.close();
      onB.close();
      await b.stop();
      await orchestrator.stop();
      await redis.stop();
    }
  });
});

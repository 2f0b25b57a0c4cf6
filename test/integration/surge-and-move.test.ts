/**
 * While a computing guest holds a worker thread, nobody else waits for it, against a real
 * one-thread sidecar: the pool adds a surge thread (src/sandbox/pool/lanes.ts), a light
 * session's exec runs there, and a co-hosted run that was idle awaiting a tool answer is
 * moved there from its parked image (src/sandbox/pool/pool.ts) and completes long before the
 * loop ends, with nothing it streamed repeated. Ordering is asserted, never wall-clock time.
 */
import { afterEach, beforeEach, expect, it } from "vitest";
import { Control } from "../../src/gen/codemode/orchestrator/v1/control_pb.js";
import { Sandbox } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { createClient, type ServiceClient } from "../../src/protocol/grpc-client.js";
import { collectStream, logged, scope as newScope, spawnCodemode, startExec, type Proc } from "../helpers/harness.js";

// A sidecar per test: a surge thread left from one test would change where the next runs.
let proc: Proc;
let sandbox: ServiceClient<typeof Sandbox.method>;
let control: ServiceClient<typeof Control.method>;
beforeEach(async () => {
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
afterEach(async () => {
  sandbox.close();
  control.close();
  expect(await proc.stop()).toBe(0);
});

/** Opens a run in session `prefix` (the fair share is per session) with one tool, `slow`. */
async function open(prefix: string) {
  const scope = newScope(prefix);
  await control.openRun({ scope, catalog: { case: "tools", value: { tools: [{ name: "slow", description: "Answers late.", parametersJson: "{}" }] } } });
  return { scope };
}

/** Events in the order the test saw them (an ordering, not a clock). */
let seen = 0;

/** A busy loop in a session of its own: `running` once its VM holds a thread, `done` with when (in `seen` order) it ended. */
function loop(timeoutMs: number) {
  const started = open("hog").then(({ scope }) => startExec(sandbox, { scope, code: `text("looping"); for (;;) {}`, config: { timeoutMs } }));
  return {
    running: started.then((s) => s.running),
    done: started.then((s) => s.done).then((out) => ({ model: out.model, at: ++seen })),
  };
}

it("a light session's exec runs on a surge thread while a loop holds the only one", async () => {
  const hog = loop(4_000);
  await hog.running;
  const { scope } = await open("light");
  const light = await collectStream(sandbox.exec({ scope, code: "return [1, 2, 3].map((x) => x * 7)" }));
  const lightAt = ++seen;
  expect(light.model).toMatchObject({ status: "completed", value: [7, 14, 21] });
  const h = await hog.done;
  expect(h.model).toMatchObject({ status: "failed", code: "timeout" });
  expect(lightAt).toBeLessThan(h.at);
  await logged(proc, /adding a surge thread/);
});

it("a run idle on a thread a neighbour's loop holds moves to another thread and completes before the loop ends", async () => {
  const { scope } = await open("victim");
  const calls: string[] = [];
  let hog: ReturnType<typeof loop> | undefined;
  const victim = collectStream(
    sandbox.exec({
      scope,
      code: `text("before"); const r = await tools.slow({}); text("after " + r); return { r, n: [1, 2, 3].map((x) => x * 2) };`,
      config: { timeoutMs: 15_000 },
    }),
    (call) => {
      calls.push(call.callId);
      // The neighbour's loop starts on the victim's thread while the victim awaits this
      // answer, which comes once the loop holds the thread.
      hog = loop(6_000);
      void hog.running.then(() => sandbox.bridgeCallback({ scope, callId: call.callId, outcome: { case: "resultJson", value: '"late"' } }));
    },
  );
  const out = await victim;
  const victimAt = ++seen;
  expect(out.model).toMatchObject({ status: "completed", value: { r: "late", n: [2, 4, 6] } });
  expect(out.model.output).toEqual([
    { type: "text", text: "before" },
    { type: "text", text: "after late" },
  ]);
  expect(calls).toHaveLength(1);
  const h = await hog!.done;
  expect(h.model).toMatchObject({ status: "failed", code: "timeout" });
  expect(victimAt).toBeLessThan(h.at);
  await logged(proc, /moving an idle run off a lane another guest holds, from its parked image/);
}, 30_000);

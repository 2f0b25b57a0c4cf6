/**
 * Cancellation reaches the engine, against a real one-thread sidecar: a gateway that
 * cancels an Exec stops its guest (a busy loop at its next interrupt poll, a native loop
 * that never polls by killing its thread shortly after), the worker is free for the next
 * exec, and the same holds for `codemode exec` killed mid-run. What shows it is the
 * sidecar's own account, not a clock: the cancelled exec's "exec finished" line names the
 * cancel (a run held until its timeoutMs, 20 s here, would end `timeout` with none), and
 * a thread is killed only with the reason that armed the kill.
 */
import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Control } from "../../src/gen/codemode/orchestrator/v1/control_pb.js";
import { Sandbox } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { createClient, type ServiceClient } from "../../src/protocol/grpc-client.js";
import { KILL_GRACE_MS } from "../../src/sandbox/pool/pool-contract.js";
import { BIN, collectStream, lineIndex, logged, openEmptyRun, spawnCodemode, startExec, type Proc } from "../helpers/harness.js";
import { sample, scrape } from "../helpers/metrics-scrape.js";
import { until } from "../helpers/until.js";

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
    "1",
    "--metrics-address",
    "127.0.0.1:0",
  ]);
  sandbox = createClient(Sandbox, proc.ready.sandbox!);
  control = createClient(Control, proc.ready.orchestrator!);
});
afterAll(async () => {
  sandbox.close();
  control.close();
  expect(await proc.stop()).toBe(0);
});

type Finished = { code?: string; cancelledBy?: string };
/** The sidecar's pool as its metrics show it: tasks waiting for a thread, surge threads, execs being served. */
async function pool() {
  const text = await scrape(proc.ready.metrics!);
  return {
    queued: sample(text, "codemode_pool_queue_size"),
    surge: sample(text, "codemode_pool_surge_threads"),
    execs: sample(text, "codemode_segments_in_flight", { kind: "exec" }),
  };
}
const KILLED = /terminating its worker thread/;

/**
 * Starts a hostile exec, cancels it once its VM runs (its first output streamed), and runs
 * the next exec on the one thread. Returns the cancelled exec's "exec finished" line and
 * where in the sidecar's stderr it and the kill (if any) are, counted from the start.
 */
async function cancelOnceRunning(code: string) {
  const scope = await openEmptyRun(control, "cancel");
  const from = proc.stderr.length;
  const controller = new AbortController();
  const hostile = startExec(sandbox, { scope, code: `text("running"); ${code}`, config: { timeoutMs: 20_000 } }, { signal: controller.signal });
  await hostile.running;
  controller.abort();
  await hostile.done.catch(() => undefined);
  const finishedAt = new RegExp(`"agentRunId":"${scope.agentRunId}".*"msg":"exec finished"`);
  const finished = JSON.parse(await logged(proc, finishedAt, { ms: 30_000, from })) as Finished;
  const next = await collectStream(sandbox.exec({ scope, code: "return 'next'" }));
  return { finished, finishedAt: lineIndex(proc, finishedAt, from), killedAt: lineIndex(proc, KILLED, from), from, value: next.model.value };
}

describe("cancellation reaches the engine", () => {
  it("a cancelled busy loop stops at its next interrupt poll and frees its worker", async () => {
    const { finished, killedAt, value } = await cancelOnceRunning("for (;;) {}");
    // Ended by the cancel, by the guest itself (no kill: a kill is logged before the exec's end).
    expect(finished.cancelledBy).toMatch(/cancel/);
    expect(finished.code).not.toBe("timeout");
    expect(killedAt).toBe(-1);
    expect(value).toBe("next");
  });

  it("a cancelled native loop that never polls is killed shortly after the cancel", async () => {
    const { finished, finishedAt, killedAt, value } = await cancelOnceRunning('new Array(2 ** 32 - 1).join("")');
    expect(finished.cancelledBy).toMatch(/cancel/);
    // The kill was armed by the cancel (a grace after it), not by the 20 s deadline, and came before the exec's end.
    expect(killedAt).toBeGreaterThan(-1);
    expect(killedAt).toBeLessThan(finishedAt);
    expect(JSON.parse(proc.stderr[killedAt]!)).toMatchObject({ killReason: "cancelled", graceMs: KILL_GRACE_MS });
    expect(value).toBe("next");
  });

  it("a native loop is stopped soon after its deadline, whatever timeoutMs would allow as grace", async () => {
    const scope = await openEmptyRun(control, "deadline");
    const from = proc.stderr.length;
    const out = await collectStream(sandbox.exec({ scope, code: 'new Array(2 ** 32 - 1).join("")', config: { timeoutMs: 4_000 } }));
    expect(out.model).toMatchObject({ status: "failed", code: "timeout" });
    // Killed by its deadline after the fixed grace (KILL_GRACE_MS, under a second), which
    // does not grow with timeoutMs (it was timeoutMs / 2 once: 2 s here).
    const kill = JSON.parse(await logged(proc, KILLED, { from })) as { killReason: string; graceMs: number; timeoutMs: number };
    expect(kill).toMatchObject({ killReason: "deadline", timeoutMs: 4_000, graceMs: KILL_GRACE_MS });
    expect(kill.graceMs).not.toBe(4_000 / 2);
  });

  it("`codemode exec` killed mid-run frees its worker", async () => {
    const from = proc.stderr.length;
    const child = spawn(
      process.execPath,
      [BIN, "exec", "--sandbox", proc.ready.sandbox!, "--orchestrator", proc.ready.orchestrator!, "--timeout-ms", "20000", "--code", "for (;;) {}"],
      { stdio: "ignore" },
    );
    // The CLI prints only the result: its exec is under way once the sidecar serves an exec.
    await until(async () => (await pool()).execs >= 1, "the CLI's exec to reach the sidecar");
    child.kill("SIGKILL");
    // The client's death cancels its exec: it ends by the cancel, not its 20 s timeoutMs.
    const cli = JSON.parse(await logged(proc, /"msg":"run opened"/, { from })) as { agentRunId: string };
    const finished = JSON.parse(await logged(proc, new RegExp(`"agentRunId":"${cli.agentRunId}".*"msg":"exec finished"`), { ms: 30_000, from })) as Finished;
    expect(finished.cancelledBy).toMatch(/cancel/);
    expect(finished.code).not.toBe("timeout");
    const scope = await openEmptyRun(control, "after-cli");
    const next = await collectStream(sandbox.exec({ scope, code: "return 'free'" }));
    expect(next.model.value).toBe("free");
  });

  it("execs beyond the bounded queue are refused with RESOURCE_EXHAUSTED, not left to hang", async () => {
    // One thread, one exec per worker: one runs, and one more on the surge thread the pool
    // adds while a loop holds the first; two may queue (threads x execs per worker x 2), and
    // two more from sessions with nothing waiting (so a full queue never locks a new
    // conversation out); then even a new session is refused.
    const scope = await openEmptyRun(control, "queue");
    const controller = new AbortController();
    // Each hostile exec in its own session: one run may hold only half the slots (its fair
    // share), and one session only half of the queue.
    const others = await Promise.all(Array.from({ length: 7 }, (_, i) => openEmptyRun(control, `busy${i}`)));
    let refused = 0;
    const loop = (s: (typeof others)[number]) =>
      collectStream(sandbox.exec({ scope: s, code: "for (;;) {}", config: { timeoutMs: 10_000 } }, { signal: controller.signal })).catch((err: unknown) => {
        if ((err as { code?: string }).code === "resource_exhausted") refused++;
      });
    /** Every exec sent so far was taken (and is served) or refused. */
    const placed = async (n: number) => {
      const p = await pool();
      return p.execs + refused === n && p;
    };
    // Five at once, then, once the surge thread took one of them, two more (one fills the
    // queue again, one is refused). The metrics say when each step happened.
    const busy = others.slice(0, 5).map(loop);
    await until(async () => {
      const p = await placed(5);
      return p && p.surge >= 1 && p.queued <= 3;
    }, "the surge thread to take one of five loops");
    busy.push(...others.slice(5).map(loop));
    // The queue is full: a new session's exec finds `2 x maxQueue` waiting.
    await until(async () => {
      const p = await placed(7);
      return p && p.queued >= 4;
    }, "two more loops to fill the queue");
    await expect(collectStream(sandbox.exec({ scope, code: "return 1" }))).rejects.toMatchObject({
      code: "resource_exhausted",
      message: expect.stringMatching(/at capacity/),
    });
    controller.abort();
    await Promise.all(busy);
    // The cancelled execs leave the queue as the worker reaches them (each stops at once).
    const served = await until(
      () =>
        collectStream(sandbox.exec({ scope, code: "return 'served'" })).then(
          (o) => o.model.value,
          () => undefined,
        ),
      "an exec to be served once the cancelled ones left the queue",
      { everyMs: 100 },
    );
    expect(served).toBe("served");
  });

  it("one agent run gets a fair share of the slots: a second exec of a run whose exec computes is refused", async () => {
    const scope = await openEmptyRun(control, "greedy");
    const controller = new AbortController();
    const busy = startExec(sandbox, { scope, code: `text("computing"); for (;;) {}`, config: { timeoutMs: 10_000 } }, { signal: controller.signal });
    await busy.running;
    await expect(collectStream(sandbox.exec({ scope, code: "return 1" }))).rejects.toMatchObject({
      code: "resource_exhausted",
      message: expect.stringMatching(/fair share/),
    });
    controller.abort();
    await busy.done.catch(() => undefined);
  });
});

/**
 * Cancellation reaches the engine, against a real one-thread sidecar: a gateway that
 * cancels an Exec stops its guest (a busy loop at its next interrupt poll, a native loop
 * that never polls by killing its thread shortly after), the worker is free for the next
 * exec long before the cancelled run's own timeoutMs, and the same holds for `codemode
 * exec` killed mid-run. Bounds are generous (a loaded 2-core machine); what they
 * distinguish is "freed at once" from "held until timeoutMs" (20 s here).
 */
import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Control } from "../../src/gen/codemode/orchestrator/v1/control_pb.js";
import { Sandbox } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { createClient, type ServiceClient } from "../../src/protocol/grpc-client.js";
import { BIN, collectStream, openEmptyRun, spawnCodemode, type Proc } from "../helpers/harness.js";

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
  ]);
  sandbox = createClient(Sandbox, proc.ready.sandbox!);
  control = createClient(Control, proc.ready.orchestrator!);
});
afterAll(async () => {
  sandbox.close();
  control.close();
  expect(await proc.stop()).toBe(0);
});

/** Starts a hostile exec, cancels it after 300 ms, and times the next exec on the one thread. */
async function cancelThenTimeNext(code: string): Promise<{ nextMs: number; value: unknown }> {
  const scope = await openEmptyRun(control, "cancel");
  const controller = new AbortController();
  const hostile = collectStream(sandbox.exec({ scope, code, config: { timeoutMs: 20_000 } }, { signal: controller.signal })).catch(() => undefined);
  await new Promise((r) => setTimeout(r, 300));
  controller.abort();
  await hostile;
  const t0 = Date.now();
  const next = await collectStream(sandbox.exec({ scope, code: "return 'next'" }));
  return { nextMs: Date.now() - t0, value: next.model.value };
}

describe("cancellation reaches the engine", () => {
  it("a cancelled busy loop stops at its next interrupt poll and frees its worker", async () => {
    const { nextMs, value } = await cancelThenTimeNext("for (;;) {}");
    expect(value).toBe("next");
    expect(nextMs).toBeLessThan(8_000);
  });

  it("a cancelled native loop that never polls is killed shortly after the cancel", async () => {
    const { nextMs, value } = await cancelThenTimeNext('new Array(2 ** 32 - 1).join("")');
    expect(value).toBe("next");
    expect(nextMs).toBeLessThan(8_000);
    expect(proc.stderr.some((l) => l.includes("terminating its worker thread"))).toBe(true);
  });

  it("a native loop is stopped soon after its deadline, whatever timeoutMs would allow as grace", async () => {
    const scope = await openEmptyRun(control, "deadline");
    const t0 = Date.now();
    const out = await collectStream(sandbox.exec({ scope, code: 'new Array(2 ** 32 - 1).join("")', config: { timeoutMs: 4_000 } }));
    const ms = Date.now() - t0;
    expect(out.model).toMatchObject({ status: "failed", code: "timeout" });
    // The old grace was timeoutMs / 2 (2 s here); now it is under a second.
    expect(ms).toBeLessThan(4_000 + 1_900);
  });

  it("`codemode exec` killed mid-run frees its worker", async () => {
    const child = spawn(
      process.execPath,
      [BIN, "exec", "--sandbox", proc.ready.sandbox!, "--orchestrator", proc.ready.orchestrator!, "--timeout-ms", "20000", "--code", "for (;;) {}"],
      { stdio: "ignore" },
    );
    await new Promise((r) => setTimeout(r, 1_000));
    child.kill("SIGKILL");
    const scope = await openEmptyRun(control, "after-cli");
    const t0 = Date.now();
    const next = await collectStream(sandbox.exec({ scope, code: "return 'free'" }));
    expect(next.model.value).toBe("free");
    expect(Date.now() - t0).toBeLessThan(8_000);
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
    const loop = (s: (typeof others)[number]) =>
      collectStream(sandbox.exec({ scope: s, code: "for (;;) {}", config: { timeoutMs: 10_000 } }, { signal: controller.signal })).catch(() => undefined);
    // Five at once (the fifth finds four waiting and is refused), then, once the surge thread
    // took one of them, two more (one fills the queue again, one is refused).
    const busy = others.slice(0, 5).map(loop);
    await new Promise((r) => setTimeout(r, 500));
    busy.push(...others.slice(5).map(loop));
    await new Promise((r) => setTimeout(r, 300));
    await expect(collectStream(sandbox.exec({ scope, code: "return 1" }))).rejects.toMatchObject({
      code: "resource_exhausted",
      message: expect.stringMatching(/at capacity/),
    });
    controller.abort();
    await Promise.all(busy);
    // The cancelled execs leave the queue as the worker reaches them (each stops at once).
    let served: unknown;
    for (let i = 0; i < 50 && served === undefined; i++) {
      served = await collectStream(sandbox.exec({ scope, code: "return 'served'" })).then(
        (o) => o.model.value,
        () => undefined,
      );
      if (served === undefined) await new Promise((r) => setTimeout(r, 100));
    }
    expect(served).toBe("served");
  });

  it("one agent run gets a fair share of the slots: a second exec of a run whose exec computes is refused", async () => {
    const scope = await openEmptyRun(control, "greedy");
    const controller = new AbortController();
    const busy = collectStream(sandbox.exec({ scope, code: "for (;;) {}", config: { timeoutMs: 10_000 } }, { signal: controller.signal })).catch(
      () => undefined,
    );
    await new Promise((r) => setTimeout(r, 300));
    await expect(collectStream(sandbox.exec({ scope, code: "return 1" }))).rejects.toMatchObject({
      code: "resource_exhausted",
      message: expect.stringMatching(/fair share/),
    });
    controller.abort();
    await busy;
  });
});

/**
 * The replay queue (src/sandbox/replay/replay-runner.ts `ReplayQueue`) with fake replays:
 * rebuilds go before requests before checks; within a class tenants take turns; a request
 * class that is full refuses at once with RESOURCE_EXHAUSTED, per tenant and in all, while
 * rebuilds are never refused; a higher class preempts a lower one that runs, once, and the
 * preempted replay runs again next; checks get one turn in eight while requests wait. And
 * `--replay-check` (src/orchestrator/replay/replay-check.ts) on a fake queue: skipped when
 * full, and idle once its checks are done. No thread, no clock.
 */
import { describe, expect, it } from "vitest";
import { ReplayCheck } from "../../src/orchestrator/replay/replay-check.js";
import { MemoryReplayRecords } from "../../src/orchestrator/replay/replay-records.js";
import { ServiceError } from "../../src/protocol/service-error.js";
import { silentLogger } from "../../src/shared/logger.js";
import { ReplayQueue, type ReplayPriority, type ReplayQueueBounds } from "../../src/sandbox/replay/replay-runner.js";

type Deferred = { promise: Promise<void>; resolve: () => void };
function deferred(): Deferred {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

const WIDE: ReplayQueueBounds = { rebuild: undefined, request: { perKey: 100, total: 1000 }, check: { perKey: 100, total: 1000 } };

/** A queue whose first replay (a rebuild, which nothing preempts) holds it until `open()`; `order` lists the replays as they start. */
function gated(bounds: ReplayQueueBounds = WIDE) {
  const queue = new ReplayQueue(bounds);
  const order: string[] = [];
  const gate = deferred();
  const first = queue.submit("rebuild", "gate", () => gate.promise);
  const add = (priority: ReplayPriority, key: string, name: string) =>
    queue.submit(priority, key, async () => {
      order.push(name);
      return name;
    });
  return {
    queue,
    order,
    add,
    async open() {
      gate.resolve();
      await first;
    },
  };
}

/** Lets every settled replay hand the thread on. */
const settle = () => new Promise((r) => setImmediate(r));

describe("the replay queue", () => {
  it("serves rebuilds, then requests, then checks, whatever order they came in", async () => {
    const q = gated();
    const all = [
      q.add("check", "acme", "c1"),
      q.add("request", "acme", "r1"),
      q.add("check", "globex", "c2"),
      q.add("rebuild", "", "b1"),
      q.add("request", "globex", "r2"),
    ];
    await q.open();
    await Promise.all(all);
    expect(q.order).toEqual(["b1", "r1", "r2", "c1", "c2"]);
  });

  it("takes turns between tenants within a class: one tenant's many replays do not go before another's", async () => {
    const q = gated();
    const all = [];
    for (let i = 1; i <= 4; i++) all.push(q.add("request", "acme", `a${i}`));
    all.push(q.add("request", "globex", "g1"), q.add("request", "globex", "g2"), q.add("request", "initech", "i1"));
    await q.open();
    await Promise.all(all);
    expect(q.order).toEqual(["a1", "g1", "i1", "a2", "g2", "a3", "a4"]);
  });

  it("a tenant that waits goes before the one served last, though that one queued first", async () => {
    const queue = new ReplayQueue(WIDE);
    const order: string[] = [];
    const started = deferred();
    const hold = deferred();
    const a1 = queue.submit("request", "acme", async () => {
      order.push("a1");
      started.resolve();
      await hold.promise;
    });
    await started.promise;
    const push = (key: string, name: string) => queue.submit("request", key, async () => void order.push(name));
    const rest = [push("acme", "a2"), push("acme", "a3"), push("globex", "g1")];
    hold.resolve();
    await Promise.all([a1, ...rest]);
    expect(order).toEqual(["a1", "g1", "a2", "a3"]);
  });

  it("refuses a request at once with RESOURCE_EXHAUSTED past a tenant's bound or the bound of all; rebuilds are never refused", async () => {
    const q = gated({ rebuild: undefined, request: { perKey: 2, total: 3 }, check: { perKey: 1, total: 1 } });
    const accepted = [q.add("request", "acme", "a1"), q.add("request", "acme", "a2")];
    let refused: unknown;
    try {
      q.add("request", "acme", "a3");
    } catch (err) {
      refused = err;
    }
    expect(refused).toBeInstanceOf(ServiceError);
    expect(refused).toMatchObject({ code: "resource_exhausted", message: expect.stringMatching(/2 for tenant "acme" \(at most 2 each\); retry once/) });
    // globex still has room of its own, up to the bound of all.
    accepted.push(q.add("request", "globex", "g1"));
    expect(() => q.add("request", "initech", "i1")).toThrow(/too many replays are waiting on this process: 3 \(at most 3\)/);
    // Another class has bounds of its own; rebuilds have none.
    accepted.push(q.add("check", "acme", "c1"));
    for (let i = 0; i < 50; i++) accepted.push(q.add("rebuild", "", `b${i}`));
    expect(q.queue.state.waiting).toEqual({ rebuild: 50, request: 3, check: 1 });
    await q.open();
    await Promise.all(accepted);
    // Room again once they ran.
    expect(await q.add("request", "acme", "a4")).toBe("a4");
  });

  it("a rebuild preempts a request that runs; the request runs again next, and is not preempted twice", async () => {
    const queue = new ReplayQueue(WIDE);
    const order: string[] = [];
    let attempts = 0;
    const started = [deferred(), deferred()];
    const finish = deferred();
    const request = queue.submit("request", "acme", (signal) => {
      const attempt = attempts++;
      order.push(`request#${attempt + 1}`);
      started[attempt]!.resolve();
      return new Promise<string>((resolve, reject) => {
        signal.addEventListener("abort", () => reject(new Error("preempted")), { once: true });
        void finish.promise.then(() => resolve(`done on attempt ${attempt + 1}`));
      });
    });
    await started[0]!.promise;
    expect(queue.state.running).toEqual({ priority: "request", key: "acme" });
    const rebuild = queue.submit("rebuild", "", async () => void order.push("rebuild"));
    await rebuild;
    await started[1]!.promise;
    // A second rebuild waits: the request was preempted once already.
    const second = queue.submit("rebuild", "", async () => void order.push("rebuild 2"));
    await settle();
    expect(queue.state.running).toEqual({ priority: "request", key: "acme" });
    finish.resolve();
    expect(await request).toBe("done on attempt 2");
    await second;
    expect(order).toEqual(["request#1", "rebuild", "request#2", "rebuild 2"]);
  });

  it("a request preempts a check; a replay that ends anyway when preempted keeps its result", async () => {
    const queue = new ReplayQueue(WIDE);
    const order: string[] = [];
    const started = deferred();
    let attempts = 0;
    // A check that ignores its signal and finishes: its result stands, it is not run again.
    const release = deferred();
    const check = queue.submit("check", "acme", async () => {
      attempts++;
      order.push("check");
      started.resolve();
      await release.promise;
      return "checked";
    });
    await started.promise;
    const request = queue.submit("request", "globex", async () => void order.push("request"));
    release.resolve();
    expect(await check).toBe("checked");
    await request;
    expect(attempts).toBe(1);
    expect(order).toEqual(["check", "request"]);
  });

  it("a replay that fails rejects its own caller only", async () => {
    const q = gated();
    const bad = q.queue.submit("request", "acme", async () => {
      throw new Error("the replay's thread failed");
    });
    const good = q.add("request", "globex", "g1");
    await q.open();
    await expect(bad).rejects.toThrow(/thread failed/);
    expect(await good).toBe("g1");
  });

  it("while checks wait, one replay in eight is a check, so requests cannot starve them", async () => {
    const q = gated();
    const all = [q.add("check", "acme", "c1"), q.add("check", "acme", "c2")];
    for (let i = 1; i <= 20; i++) all.push(q.add("request", "globex", `r${i}`));
    await q.open();
    await Promise.all(all);
    expect(q.order.indexOf("c1")).toBe(7);
    expect(q.order.indexOf("c2")).toBe(15);
    expect(q.order.filter((n) => n.startsWith("r"))).toEqual(Array.from({ length: 20 }, (_, i) => `r${i + 1}`));
  });
});

describe("--replay-check on the queue", () => {
  const scope = (tenant?: string) => ({ agentId: "a", sessionId: "s", sessionKey: "k", agentRunId: "r", ...(tenant ? { tenant } : {}) });

  it("queues each finished run as its tenant's check, skips one the queue refuses, and is idle once they are done", async () => {
    const tenants: string[] = [];
    const gate = deferred();
    let refuse = false;
    const check = new ReplayCheck(new MemoryReplayRecords(), silentLogger(), (tenant, work) => {
      if (refuse) throw new ServiceError("resource_exhausted", "too many replays are waiting on this process");
      tenants.push(tenant);
      return gate.promise.then(() => work(async () => ({ verdict: "same" }) as never));
    });
    check.finished(scope("acme"), "cm_1");
    check.finished(scope(), "cm_2");
    refuse = true;
    check.finished(scope("globex"), "cm_3");
    expect(tenants).toEqual(["acme", "default"]);
    const idle = check.idle(60_000);
    gate.resolve();
    expect(await idle).toBe(true);
    expect(await check.idle(0)).toBe(true);
  });
});

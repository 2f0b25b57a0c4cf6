/**
 * The orchestrator's run-cache push (src/orchestrator/link/run-cache-push.ts) with fake
 * sidecars and a fake bus: a tenant's invalidation names to each sidecar exactly the runs of
 * that tenant it holds (none of another tenant's, even with the same scope strings; the
 * default tenant's are the runs without a tenant), in messages of a bounded size, and
 * forgets them unless kept for an outage; a failed write publishes it without pushing; and
 * the bus's messages (src/orchestrator/link/run-cache-bus.ts) carry the tenant so that a
 * build that reads no tenant drops every run, while an old `all` still means every run.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import type { BusInvalidation, RunCacheBus } from "../../src/orchestrator/link/run-cache-bus.js";
import { fromWire, toWire, type Wire } from "../../src/orchestrator/link/run-cache-bus.js";
import { type InvalidateMessage, MAX_SCOPES_PER_MESSAGE, RunCachePush } from "../../src/orchestrator/link/run-cache-push.js";
import type { Scope } from "../../src/shared/scope.js";
import { scopeKeyOf } from "../../src/shared/scope.js";

const run = (n: number | string, tenant?: string): Scope => ({
  agentId: "agent",
  sessionId: "session",
  sessionKey: "key",
  agentRunId: `run-${n}`,
  ...(tenant ? { tenant } : {}),
});

type FakeSidecar = { got: InvalidateMessage[]; disconnects: string[] };

/** Attaches a sidecar that acks every invalidation (a moment later), unless `silent`. */
function sidecar(push: RunCachePush, id: string, options: { silent?: boolean } = {}): FakeSidecar {
  const s: FakeSidecar = { got: [], disconnects: [] };
  push.attach(id, {
    send(m) {
      s.got.push(m);
      if (!options.silent) queueMicrotask(() => push.ack(m.requestId, id));
    },
    disconnect(reason) {
      s.disconnects.push(reason);
    },
  });
  return s;
}

/** The runs a sidecar was told of, as scope keys, sorted. */
const named = (s: FakeSidecar) => s.got.flatMap((m) => m.scopes.map(scopeKeyOf)).sort();
const keys = (...scopes: Scope[]) => scopes.map(scopeKeyOf).sort();

/** A bus that records what is published, and lets a test hand this replica a message as if another replica sent it. */
function fakeBus() {
  const published: BusInvalidation[] = [];
  const bus = {
    sure: true,
    apply: async (_inv: BusInvalidation) => undefined,
    onUnsure: () => undefined,
    onSureAgain: () => undefined,
    publish: async (inv: BusInvalidation) => void published.push(inv),
  };
  return { bus: bus as unknown as RunCacheBus, published, receive: (inv: BusInvalidation) => bus.apply(inv) };
}

afterEach(() => {
  vi.useRealTimers();
});

describe("a tenant's invalidation", () => {
  it("names to each sidecar only the runs of that tenant it holds, and forgets them", async () => {
    const push = new RunCachePush();
    const one = sidecar(push, "one");
    const two = sidecar(push, "two");
    const idle = sidecar(push, "idle");
    // The same scope strings in three tenants (the default tenant's carries none).
    for (const s of [run(1, "acme"), run(2, "acme"), run(1, "globex"), run(1)]) push.resolved("one", s);
    for (const s of [run(1, "acme"), run(2, "globex")]) push.resolved("two", s);

    await push.invalidate({ tenant: "acme" });
    expect(named(one)).toEqual(keys(run(1, "acme"), run(2, "acme")));
    expect(named(two)).toEqual(keys(run(1, "acme")));
    expect(one.got.every((m) => !m.all && !m.keepForOutage)).toBe(true);
    // A sidecar that holds none of the tenant's runs is not told anything.
    expect(idle.got).toEqual([]);

    // No longer their holders: the tenant's runs are not named again; the others' still are.
    await push.invalidate({ tenant: "acme" });
    expect(one.got).toHaveLength(1);
    expect(two.got).toHaveLength(1);
    await push.invalidate(run(1, "globex"));
    expect(one.got.at(-1)?.scopes).toEqual([run(1, "globex")]);
    await push.invalidate({ tenant: "globex" });
    expect(two.got.at(-1)?.scopes).toEqual([run(2, "globex")]);
    expect(one.got).toHaveLength(2);
  });

  it("of the default tenant names the runs without a tenant, and so every run of a deployment without tenants", async () => {
    const push = new RunCachePush();
    const one = sidecar(push, "one");
    for (const s of [run(1), run(2), run(3, "acme")]) push.resolved("one", s);
    await push.invalidate({ tenant: "default" });
    expect(named(one)).toEqual(keys(run(1), run(2)));
    // Written with the default tenant named, it is the same run.
    push.resolved("one", run(4, "default"));
    await push.invalidate({ tenant: "" });
    expect(named(one)).toEqual(keys(run(1), run(2), run(4)));
  });

  it("kept for an outage, keeps its holders; `exceptSidecar` stays the only holder", async () => {
    const push = new RunCachePush();
    const one = sidecar(push, "one");
    const two = sidecar(push, "two");
    for (const id of ["one", "two"]) push.resolved(id, run(1, "acme"));
    await push.invalidate({ tenant: "acme" }, { keepForOutage: true });
    expect(one.got.map((m) => m.keepForOutage)).toEqual([true]);
    await push.invalidate({ tenant: "acme" }, { exceptSidecar: "two" });
    expect(one.got).toHaveLength(2);
    expect(two.got).toHaveLength(1);
    await push.invalidate({ tenant: "acme" });
    expect(one.got).toHaveLength(2);
    expect(two.got).toHaveLength(2);
  });

  it("splits many runs into bounded messages, and returns once every one was acked", async () => {
    const push = new RunCachePush();
    const acks: Array<() => void> = [];
    const got: InvalidateMessage[] = [];
    push.attach("one", {
      send: (m) => {
        got.push(m);
        acks.push(() => push.ack(m.requestId, "one"));
      },
      disconnect: () => undefined,
    });
    const n = 2 * MAX_SCOPES_PER_MESSAGE + 7;
    for (let i = 0; i < n; i++) push.resolved("one", run(i, "acme"));
    push.resolved("one", run(0, "globex"));
    let done = false;
    const change = push.invalidate({ tenant: "acme" }).then(() => (done = true));
    expect(got.map((m) => m.scopes.length)).toEqual([MAX_SCOPES_PER_MESSAGE, MAX_SCOPES_PER_MESSAGE, 7]);
    expect(new Set(got.map((m) => m.requestId)).size).toBe(3);
    for (const ack of acks.slice(0, 2)) ack();
    await Promise.resolve();
    expect(done).toBe(false);
    acks[2]!();
    await change;
    expect(new Set(got.flatMap((m) => m.scopes.map((s) => s.tenant)))).toEqual(new Set(["acme"]));
  });

  it("disconnects a sidecar that acks none of its messages once, and the change still returns", async () => {
    vi.useFakeTimers();
    const push = new RunCachePush();
    const silent = sidecar(push, "silent", { silent: true });
    const fine = sidecar(push, "fine");
    for (let i = 0; i < MAX_SCOPES_PER_MESSAGE + 1; i++) push.resolved("silent", run(i, "acme"));
    push.resolved("fine", run(0, "acme"));
    const change = push.invalidate({ tenant: "acme" });
    await vi.runAllTimersAsync();
    await change;
    expect(silent.got).toHaveLength(2);
    expect(silent.disconnects).toHaveLength(1);
    expect(fine.disconnects).toEqual([]);
  });
});

describe("a tenant's invalidation across replicas", () => {
  it("is published as every run of that tenant, and one heard from another replica is applied as such", async () => {
    const { bus, published, receive } = fakeBus();
    const push = new RunCachePush(bus);
    const one = sidecar(push, "one");
    for (const s of [run(1, "acme"), run(1, "globex")]) push.resolved("one", s);
    await push.invalidate({ tenant: "acme" });
    expect(published).toEqual([{ scopes: [], all: true, tenant: "acme", awaitAcks: true }]);
    expect(named(one)).toEqual(keys(run(1, "acme")));

    push.resolved("one", run(2, "acme"));
    await receive({ scopes: [], all: true, tenant: "acme", awaitAcks: true });
    expect(named(one)).toEqual(keys(run(1, "acme"), run(2, "acme")));
    // An `all` without a tenant (a replica of an older build) is every run.
    await receive({ scopes: [], all: true, awaitAcks: true });
    expect(one.got.at(-1)).toMatchObject({ all: true, scopes: [] });
  });

  it("after a failed write, is published without waiting and not pushed before it lands", async () => {
    const { bus, published } = fakeBus();
    const push = new RunCachePush(bus);
    const one = sidecar(push, "one");
    push.resolved("one", run(1, "acme"));
    const failure = new Error("the store timed out");
    expect(() => push.failedWrite({ tenant: "acme" })(failure)).toThrow(failure);
    expect(published).toEqual([{ scopes: [], all: true, tenant: "acme", awaitAcks: false }]);
    expect(one.got).toEqual([]);
    // It lands: every replica, this one too, hears it and drops the tenant's runs then.
    await bus.apply({ ...published[0]!, awaitAcks: false });
    expect(named(one)).toEqual(keys(run(1, "acme")));
    expect(one.got[0]?.keepForOutage).toBe(false);
  });
});

describe("the bus's message for a tenant's runs", () => {
  const wire = (inv: BusInvalidation): Partial<Wire> => JSON.parse(JSON.stringify(toWire(inv, "a", "id-1"))) as Partial<Wire>;

  it("names the tenant, and reads back as that tenant's runs on another replica", () => {
    const w = wire({ scopes: [], all: true, tenant: "acme", awaitAcks: true, keepForOutage: true });
    expect(w).toMatchObject({ all: true, scopes: [], tenant: "acme", keep: true });
    expect(fromWire(w, "b")).toEqual({ scopes: [], all: true, tenant: "acme", awaitAcks: true, keepForOutage: true });
    // Its own message: its sidecars were told directly.
    expect(fromWire(w, "a").awaitAcks).toBe(false);
  });

  it("is every run to a build that reads no tenant, and an old `all` is every run to this one", () => {
    const { tenant: _ignored, ...asOldBuildReadsIt } = wire({ scopes: [], all: true, tenant: "acme", awaitAcks: true });
    expect(fromWire(asOldBuildReadsIt, "b")).toEqual({ scopes: [], all: true, awaitAcks: true });
    expect(fromWire({ from: "old", id: "x", scopes: [], all: true, acks: true }, "b")).toEqual({ scopes: [], all: true, awaitAcks: true });
  });

  it("is every run when its tenant cannot be read, and a tenant never narrows runs named by scope", () => {
    for (const tenant of [7, "", null, { name: "acme" }])
      expect(fromWire({ from: "c", id: "x", scopes: [], all: true, tenant, acks: false } as unknown as Partial<Wire>, "b")).toEqual({
        scopes: [],
        all: true,
        awaitAcks: false,
      });
    const byScope = fromWire({ from: "c", id: "x", scopes: [run(1, "acme")], all: false, tenant: "globex", acks: false }, "b");
    expect(byScope).toEqual({ scopes: [run(1, "acme")], all: false, awaitAcks: false });
    // A scope it cannot read could be any run: every run goes, of every tenant.
    const unread = fromWire({ from: "c", id: "x", scopes: [{ agentId: 1 }], all: true, tenant: "acme", acks: false } as unknown as Partial<Wire>, "b");
    expect(unread).toEqual({ scopes: [], all: true, awaitAcks: false });
  });
});

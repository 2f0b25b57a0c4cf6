/**
 * The RunStore contract, run against both stores (in-memory and a real redis-server), so
 * they keep exactly the same semantics; then what only the Redis store promises: a
 * restarted orchestrator sees what the old one stored, and Redis being away is an error,
 * not a hang or a crash.
 */
import { randomBytes, randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createRunStore } from "../../src/orchestrator/state/create-store.js";
import { MemoryRunStore } from "../../src/orchestrator/suspended/memory-store.js";
import { RedisRunStore } from "../../src/orchestrator/suspended/redis-store.js";
import { APPROVAL_KEEP_MS } from "../../src/shared/link-wire.js";
import { GENERATION_MEMORY_MS, type RunStore, type StoreScope, type StoredAnswer, type SuspendedRecord } from "../../src/orchestrator/suspended/run-store.js";
import { freePort, startRedis, type RedisServer } from "../helpers/redis.js";
import { until } from "../helpers/until.js";

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis.stop();
});

const opened: RunStore[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((s) => s.close()));
});

function tracked<T extends RunStore>(store: T): T {
  opened.push(store);
  return store;
}

/** A Redis store on its own key prefix, so tests never see each other's runs. */
function redisStore(prefix = `test:${randomUUID()}:`): RedisRunStore {
  return tracked(new RedisRunStore(redis.url, { prefix }));
}

const SCOPE: StoreScope = { agentId: "agent-1", sessionId: "session-1", sessionKey: "key-1", agentRunId: "run-1" };
const LEASE = 30_000;
const MAX = 100;

function record(id: string, over: Partial<SuspendedRecord> = {}): SuspendedRecord {
  return {
    codeModeRunId: id,
    scope: SCOPE,
    snapshot: Uint8Array.from([0x00, 0x01, 0x7f, 0x80, 0xfe, 0xff]),
    pending: ["c1", "c2", "c3"].map((c) => ({ callId: `${id}:${c}`, kind: "call" as const, toolId: "tool-1", toolName: "echo" })),
    answers: [],
    reason: "pending_tools",
    configJson: '{"timeoutMs":1000}',
    outputBytes: 42,
    expiresAtMs: Date.now() + 60_000,
    catalogVersion: "v1",
    execCallId: `${id}:exec`,
    generation: 1,
    ...over,
  };
}

function ok(callId: string, value: unknown = callId): StoredAnswer {
  return { callId, ok: true, json: JSON.stringify(value) };
}

/** Stored answers without the time the store took them (each store stamps its own clock). */
function plain(answers: StoredAnswer[] | undefined): StoredAnswer[] | undefined {
  return answers?.map(({ answeredAtMs: _at, ...a }) => a as StoredAnswer);
}

function mark(callId: string, reason: string, expiresAtMs = 0, requestedAtMs = Date.now()): StoredAnswer {
  return { callId, approval: { reason, expiresAtMs, requestedAtMs } };
}

async function claimed(store: RunStore, id: string, scope = SCOPE, leaseMs = LEASE): Promise<{ run: SuspendedRecord; token: string }> {
  const claim = await store.claim(id, scope, leaseMs);
  if (!claim.ok) throw new Error(`claim of ${id} failed: ${claim.why}`);
  return claim;
}

describe.each([
  { kind: "memory", open: (): RunStore => tracked(new MemoryRunStore()) },
  { kind: "redis", open: (): RunStore => redisStore() },
])("$kind run store", ({ kind, open }) => {
  it("has its kind", () => {
    expect(open().kind).toBe(kind);
  });

  it("returns a suspended run unchanged, binary snapshot bytes included", async () => {
    const store = open();
    const big = randomBytes(1024 * 1024);
    const snapshot = Buffer.concat([Buffer.from([0x00, 0xff, 0x00, 0xff]), big, Buffer.from([0xff, 0x00])]);
    const rec = record("rt", { snapshot, answers: [ok("rt:c2", { n: 1 })] });
    expect(await store.suspend(rec, { maxSuspendedRuns: MAX })).toEqual({ ok: true, answeredCallIds: ["rt:c2"] });
    expect(await store.count()).toBe(1);

    const { run, token } = await claimed(store, "rt");
    expect(token).not.toBe("");
    expect(Buffer.compare(run.snapshot, snapshot)).toBe(0);
    expect({ ...run, snapshot: undefined }).toEqual({ ...rec, snapshot: undefined });
  });

  it("refuses a claim from another agent, session or session key, or another agent run", async () => {
    const store = open();
    await store.suspend(record("sc"), { maxSuspendedRuns: MAX });
    expect(await store.claim("sc", { ...SCOPE, sessionId: "other" }, LEASE)).toEqual({ ok: false, why: "session" });
    expect(await store.claim("sc", { ...SCOPE, sessionKey: "other" }, LEASE)).toEqual({ ok: false, why: "session" });
    expect(await store.claim("sc", { ...SCOPE, agentId: "other" }, LEASE)).toEqual({ ok: false, why: "session" });
    expect(await store.claim("sc", { ...SCOPE, agentRunId: "other" }, LEASE)).toEqual({ ok: false, why: "run" });
    expect((await store.claim("sc", SCOPE, LEASE)).ok).toBe(true);
  });

  it("does not know an unknown run id", async () => {
    expect(await open().claim("nope", SCOPE, LEASE)).toEqual({ ok: false, why: "unavailable" });
  });

  it("forgets a run once it expired, and frees its slot", async () => {
    const store = open();
    await store.suspend(record("ex", { expiresAtMs: Date.now() + 300 }), { maxSuspendedRuns: 1 });
    await until(async () => (await store.count()) === 0, "the run to expire", { everyMs: 20 });
    expect(await store.claim("ex", SCOPE, LEASE)).toEqual({ ok: false, why: "unavailable" });
    expect(await store.addAnswer(SCOPE, ok("ex:c1"))).toEqual({ result: "ended", codeModeRunId: "ex" });
    expect(await store.suspend(record("ex2"), { maxSuspendedRuns: 1 })).toEqual({ ok: true, answeredCallIds: [] });
  });

  it("allows one claim at a time, and voids a claim whose lease passed", async () => {
    const store = open();
    await store.suspend(record("ls"), { maxSuspendedRuns: MAX });
    const first = await claimed(store, "ls", SCOPE, 200);
    const second = await until(
      async () => {
        const claim = await store.claim("ls", SCOPE, LEASE);
        if (claim.ok) return claim;
        expect(claim.why).toBe("busy");
        return undefined;
      },
      "the first lease to pass",
      { everyMs: 20 },
    );
    expect(await store.claim("ls", SCOPE, LEASE)).toEqual({ ok: false, why: "busy" });
    expect(await store.release("ls", first.token, true)).toBe(false);
    expect(await store.answers("ls", first.token, new Set())).toBeUndefined();
    expect(await store.suspend(record("ls", { generation: 2, snapshot: Uint8Array.from([2]) }), { maxSuspendedRuns: MAX, claimToken: first.token })).toEqual({
      ok: false,
      why: "claim_lost",
    });
    expect(await store.release("ls", second.token, true)).toBe(true);
  });

  it("lets a claim be retried with its own token, and no other", async () => {
    const store = open();
    await store.suspend(record("rt"), { maxSuspendedRuns: MAX });
    const first = await store.claim("rt", SCOPE, LEASE, "token-a");
    expect(first.ok && first.token).toBe("token-a");
    // The reply was lost; the same sidecar asks again with the same token.
    const retry = await store.claim("rt", SCOPE, LEASE, "token-a");
    expect(retry.ok && retry.token).toBe("token-a");
    expect(await store.claim("rt", SCOPE, LEASE, "token-b")).toEqual({ ok: false, why: "busy" });
    expect(await store.release("rt", "token-a", true)).toBe(true);
    expect((await store.claim("rt", SCOPE, LEASE, "token-b")).ok).toBe(true);
  });

  it("extends expiry to the lease of a claim", async () => {
    const store = open();
    const expiresAtMs = Date.now() + 60_000;
    await store.suspend(record("xl", { expiresAtMs }), { maxSuspendedRuns: MAX });
    const { run } = await claimed(store, "xl", SCOPE, 600_000);
    expect(run.expiresAtMs).toBeGreaterThan(expiresAtMs);
  });

  it("keeps a released run claimable, and deletes a settled one", async () => {
    const store = open();
    await store.suspend(record("rk"), { maxSuspendedRuns: MAX });
    await store.suspend(record("rd"), { maxSuspendedRuns: MAX });
    const keep = await claimed(store, "rk");
    expect(await store.release("rk", "not-the-token", true)).toBe(false);
    expect(await store.release("rk", keep.token, true)).toBe(true);
    expect(await store.release("rk", keep.token, true)).toBe(false);
    const again = await claimed(store, "rk");
    expect(again.run.snapshot).toEqual(keep.run.snapshot);

    const settle = await claimed(store, "rd");
    expect(await store.count()).toBe(2);
    expect(await store.release("rd", settle.token, false)).toBe(true);
    expect(await store.claim("rd", SCOPE, LEASE)).toEqual({ ok: false, why: "unavailable" });
    expect(await store.count()).toBe(1);
  });

  it("caps new runs, but lets a claimed run re-suspend at the cap", async () => {
    const store = open();
    for (const id of ["a", "b", "c"]) expect(await store.suspend(record(id), { maxSuspendedRuns: 3 })).toEqual({ ok: true, answeredCallIds: [] });
    expect(await store.suspend(record("d"), { maxSuspendedRuns: 3 })).toEqual({ ok: false, why: "cap" });
    const { token } = await claimed(store, "b");
    expect(await store.suspend(record("b", { generation: 2 }), { maxSuspendedRuns: 3, claimToken: token })).toEqual({ ok: true, answeredCallIds: [] });
    expect(await store.count()).toBe(3);
  });

  it("refuses a re-suspension without the current claim", async () => {
    const store = open();
    await store.suspend(record("st"), { maxSuspendedRuns: MAX });
    // Another snapshot for the stored run (the same one again is a resend: see below).
    const other = record("st", { snapshot: Uint8Array.from([7]) });
    expect(await store.suspend(other, { maxSuspendedRuns: MAX })).toEqual({ ok: false, why: "claim_lost" });
    expect(await store.suspend({ ...other, generation: 2 }, { maxSuspendedRuns: MAX, claimToken: "made-up" })).toEqual({ ok: false, why: "claim_lost" });
    const { token } = await claimed(store, "st");
    expect(await store.suspend(record("st", { outputBytes: 1, generation: 2 }), { maxSuspendedRuns: MAX, claimToken: token })).toEqual({
      ok: true,
      answeredCallIds: [],
    });
    // The re-suspension ended that claim.
    expect(await store.suspend(record("st", { generation: 3 }), { maxSuspendedRuns: MAX, claimToken: token })).toEqual({ ok: false, why: "claim_lost" });
    expect((await claimed(store, "st")).run.outputBytes).toBe(1);
    expect(await store.suspend(record("gone"), { maxSuspendedRuns: MAX, claimToken: token })).toEqual({ ok: false, why: "claim_lost" });
  });

  it("keeps one answer per call and tells late, foreign and unknown answers apart", async () => {
    const store = open();
    await store.suspend(record("an"), { maxSuspendedRuns: MAX });
    expect(await store.addAnswer(SCOPE, ok("an:c1"))).toEqual({ result: "stored", codeModeRunId: "an" });
    expect(await store.addAnswer(SCOPE, ok("an:c1", "again"))).toEqual({ result: "duplicate", codeModeRunId: "an" });
    expect(await store.addAnswer({ ...SCOPE, agentRunId: "other" }, ok("an:c2"))).toEqual({ result: "scope" });
    expect(await store.addAnswer({ ...SCOPE, sessionId: "other" }, ok("an:c2"))).toEqual({ result: "scope" });
    expect(await store.addAnswer(SCOPE, ok("nobody:c1"))).toEqual({ result: "unknown" });
    const failed: StoredAnswer = { callId: "an:c3", ok: false, error: { name: "ToolError", message: "nope" } };
    expect(await store.addAnswer(SCOPE, failed)).toEqual({ result: "stored", codeModeRunId: "an" });

    const { run, token } = await claimed(store, "an");
    expect(plain(run.answers)).toEqual([ok("an:c1"), failed]);
    expect(run.answers.every((a) => Math.abs((a.answeredAtMs ?? 0) - Date.now()) < 60_000)).toBe(true);
    // A claimed run still takes answers.
    expect(await store.addAnswer(SCOPE, ok("an:c2"))).toEqual({ result: "stored", codeModeRunId: "an" });
    expect(plain(await store.answers("an", token, new Set()))).toEqual([ok("an:c1"), ok("an:c2"), failed]);
    expect(plain(await store.answers("an", token, new Set(["an:c1", "an:c3"])))).toEqual([ok("an:c2")]);
    expect(await store.answers("an", "not-the-token", new Set())).toBeUndefined();

    await store.suspend(record("an2"), { maxSuspendedRuns: MAX });
    await store.addAnswer(SCOPE, ok("an2:c1"));
    const settle = await claimed(store, "an2");
    expect(await store.release("an2", settle.token, false)).toBe(true);
    expect(await store.addAnswer(SCOPE, ok("an2:c2"))).toEqual({ result: "ended", codeModeRunId: "an2" });
    expect(await store.addAnswer(SCOPE, ok("an2:c1", "again"))).toEqual({ result: "duplicate", codeModeRunId: "an2" });
    expect(await store.addAnswer({ ...SCOPE, agentId: "other" }, ok("an2:c2"))).toEqual({ result: "scope" });
  });

  it("on re-suspension keeps answers of calls still pending and remembers the others", async () => {
    const store = open();
    const pending = (...ids: string[]) => ids.map((callId) => ({ callId, kind: "call" as const, toolId: "tool-1", toolName: "echo" }));
    await store.suspend(record("rs", { pending: pending("p1", "p2", "p3", "p5") }), { maxSuspendedRuns: MAX });
    await store.addAnswer(SCOPE, ok("p1"));
    await store.addAnswer(SCOPE, ok("p2"));
    const { token } = await claimed(store, "rs");
    // The VM consumed p1 and p5 went away unanswered; p3 was answered in the sidecar; p4 is new.
    const next = record("rs", { pending: pending("p2", "p3", "p4"), answers: [ok("p3"), ok("p2", "sidecar copy")], generation: 2 });
    const stored = await store.suspend(next, { maxSuspendedRuns: MAX, claimToken: token });
    expect(stored.ok && stored.answeredCallIds.sort()).toEqual(["p2", "p3"]);

    const { run } = await claimed(store, "rs");
    expect(plain(run.answers)).toEqual([ok("p2"), ok("p3")]);
    expect(run.pending.map((p) => p.callId)).toEqual(["p2", "p3", "p4"]);
    expect(await store.addAnswer(SCOPE, ok("p1"))).toEqual({ result: "duplicate", codeModeRunId: "rs" });
    expect(await store.addAnswer(SCOPE, ok("p3"))).toEqual({ result: "duplicate", codeModeRunId: "rs" });
    expect(await store.addAnswer(SCOPE, ok("p5"))).toEqual({ result: "ended", codeModeRunId: "rs" });
    expect(await store.addAnswer(SCOPE, ok("p4"))).toEqual({ result: "stored", codeModeRunId: "rs" });
  });

  it("keeps an approval mark until a decision replaces it; a second mark is asking, a decision after the expiry expired", async () => {
    const store = open();
    const asked = Date.now();
    await store.suspend(record("ap", { approvalTimeoutMs: 5_000 }), { maxSuspendedRuns: MAX });
    // Expiry 0 is the run's approvalTimeoutMs; a later one is clamped to it.
    expect(await store.addAnswer(SCOPE, mark("ap:c1", "deploy", 0, asked))).toEqual({ result: "stored", codeModeRunId: "ap" });
    expect(await store.addAnswer(SCOPE, mark("ap:c3", "far", asked + 3_600_000, asked))).toEqual({ result: "stored", codeModeRunId: "ap" });
    expect(await store.addAnswer(SCOPE, mark("ap:c1", "again"))).toEqual({ result: "asking", codeModeRunId: "ap" });
    const first = await claimed(store, "ap");
    expect(first.run.answers).toEqual([mark("ap:c1", "deploy", asked + 5_000, asked), mark("ap:c3", "far", asked + 5_000, asked)]);
    // A run awaiting a person is kept past the expiry, so a wait then can say ApprovalExpired.
    expect(first.run.expiresAtMs).toBeGreaterThanOrEqual(asked + 5_000 + APPROVAL_KEEP_MS);
    // A sidecar that saw the mark still gets the decision.
    expect(await store.answers("ap", first.token, new Set(["ap:c1#approval", "ap:c3#approval"]))).toEqual([]);
    expect(await store.addAnswer(SCOPE, ok("ap:c1", "yes"))).toEqual({ result: "stored", codeModeRunId: "ap" });
    const after = await store.answers("ap", first.token, new Set(["ap:c1#approval", "ap:c3#approval"]));
    expect(plain(after)).toEqual([{ ...ok("ap:c1", "yes"), approvalRequestedAtMs: asked, approvalReason: "deploy" }]);
    expect(await store.addAnswer(SCOPE, ok("ap:c1", "twice"))).toEqual({ result: "duplicate", codeModeRunId: "ap" });

    // Re-suspended with a new mark (c2) and a decision for c3 made in the sidecar: the decision replaces the stored mark.
    const next = record("ap", { answers: [mark("ap:c2", "soon", Date.now() + 300), ok("ap:c3", "sidecar")], generation: 2, approvalTimeoutMs: 5_000 });
    const stored = await store.suspend(next, { maxSuspendedRuns: MAX, claimToken: first.token });
    expect(stored.ok && stored.answeredCallIds.sort()).toEqual(["ap:c1", "ap:c3"]);
    await new Promise((r) => setTimeout(r, 400));
    expect(await store.addAnswer(SCOPE, ok("ap:c2", "late"))).toEqual({ result: "expired", codeModeRunId: "ap" });
    const second = await claimed(store, "ap");
    expect(plain(second.run.answers)?.map((a) => [a.callId, "approval" in a ? "mark" : "decision"])).toEqual([
      ["ap:c1", "decision"],
      ["ap:c2", "mark"],
      ["ap:c3", "decision"],
    ]);
    // Settled: a decision for the call whose approval expired is still told apart.
    expect(await store.release("ap", second.token, false)).toBe(true);
    expect(await store.addAnswer(SCOPE, ok("ap:c2", "later still"))).toEqual({ result: "expired", codeModeRunId: "ap" });
  });

  it("keeps a per-run generation: 1 for a new run, the claimed one plus one for each re-suspension, nothing else", async () => {
    const store = open();
    const stale = { ok: false, why: "stale" };
    for (const generation of [0, 2, 7]) expect(await store.suspend(record("g", { generation }), { maxSuspendedRuns: MAX })).toEqual(stale);
    expect(await store.count()).toBe(0);
    expect(await store.suspend(record("g"), { maxSuspendedRuns: MAX })).toEqual({ ok: true, answeredCallIds: [] });
    let { run, token } = await claimed(store, "g");
    expect(run.generation).toBe(1);
    // The same, an older, or a skipped generation is refused and changes nothing; the claim holds.
    for (const generation of [1, 0, 3]) {
      expect(
        await store.suspend(record("g", { generation, outputBytes: 7, snapshot: Uint8Array.from([generation]) }), { maxSuspendedRuns: MAX, claimToken: token }),
      ).toEqual(stale);
    }
    expect(await store.answers("g", token, new Set())).toEqual([]);
    expect(await store.suspend(record("g", { generation: 2, snapshot: Uint8Array.from([2]) }), { maxSuspendedRuns: MAX, claimToken: token })).toEqual({
      ok: true,
      answeredCallIds: [],
    });
    ({ run, token } = await claimed(store, "g"));
    expect([run.generation, [...run.snapshot], run.outputBytes]).toEqual([2, [2], 42]);
    // A wait that stored nothing leaves the generation as it was.
    expect(await store.release("g", token, true)).toBe(true);
    ({ run, token } = await claimed(store, "g"));
    expect(run.generation).toBe(2);
    expect(await store.suspend(record("g", { generation: 3 }), { maxSuspendedRuns: MAX, claimToken: token })).toEqual({ ok: true, answeredCallIds: [] });
    expect((await claimed(store, "g")).run.generation).toBe(3);
  });

  it("takes a suspension sent again (its reply lost) as stored, changing nothing; a different snapshot at that generation stays stale", async () => {
    const store = open();
    const first = record("rs", { snapshot: Uint8Array.from([1, 1, 1]) });
    expect(await store.suspend(first, { maxSuspendedRuns: MAX })).toEqual({ ok: true, answeredCallIds: [] });
    expect(await store.addAnswer(SCOPE, ok("rs:c1"))).toEqual({ result: "stored", codeModeRunId: "rs" });
    // Sent again, as a sidecar does after its orchestrator died before replying: the stored answer is reported.
    expect(await store.suspend(first, { maxSuspendedRuns: 1 })).toEqual({ ok: true, answeredCallIds: ["rs:c1"] });
    expect(await store.suspend(record("rs", { snapshot: Uint8Array.from([1, 1, 2]) }), { maxSuspendedRuns: MAX })).toEqual({ ok: false, why: "claim_lost" });
    expect(await store.count()).toBe(1);

    const { token } = await claimed(store, "rs");
    const second = record("rs", { generation: 2, snapshot: Uint8Array.from([2, 2, 2]), outputBytes: 9 });
    expect(await store.suspend(second, { maxSuspendedRuns: MAX, claimToken: token })).toEqual({ ok: true, answeredCallIds: ["rs:c1"] });
    // The claim ended with the first; the same replacement again is stored, another is not.
    expect(await store.suspend(second, { maxSuspendedRuns: MAX, claimToken: token })).toEqual({ ok: true, answeredCallIds: ["rs:c1"] });
    expect(await store.suspend({ ...second, snapshot: Uint8Array.from([2, 2, 3]) }, { maxSuspendedRuns: MAX, claimToken: token })).toEqual({
      ok: false,
      why: "claim_lost",
    });
    const again = await claimed(store, "rs");
    expect([again.run.generation, [...again.run.snapshot], again.run.outputBytes, again.run.answers.map((a) => a.callId)]).toEqual([
      2,
      [2, 2, 2],
      9,
      ["rs:c1"],
    ]);
  });

  it("remembers a run's generation after it settled, was closed or expired: the run id never starts over", async () => {
    const store = open();
    const stale = { ok: false, why: "stale" };
    await store.suspend(record("gs"), { maxSuspendedRuns: MAX });
    const { token } = await claimed(store, "gs");
    expect(await store.suspend(record("gs", { generation: 2 }), { maxSuspendedRuns: MAX, claimToken: token })).toEqual({ ok: true, answeredCallIds: [] });
    const settle = await claimed(store, "gs");
    expect(await store.release("gs", settle.token, false)).toBe(true);
    // An older snapshot of the settled run (generation 1 or 2), or a made-up later one, sent as a new run.
    for (const generation of [1, 2, 3]) expect(await store.suspend(record("gs", { generation }), { maxSuspendedRuns: MAX })).toEqual(stale);
    expect(await store.claim("gs", SCOPE, LEASE)).toEqual({ ok: false, why: "unavailable" });

    await store.suspend(record("gc"), { maxSuspendedRuns: MAX });
    expect(await store.deleteScope(SCOPE)).toBe(1);
    expect(await store.suspend(record("gc"), { maxSuspendedRuns: MAX })).toEqual(stale);

    await store.suspend(record("ge", { expiresAtMs: Date.now() + 300 }), { maxSuspendedRuns: MAX });
    await until(async () => (await store.count()) === 0, "the run to expire", { everyMs: 20 });
    expect(await store.suspend(record("ge"), { maxSuspendedRuns: MAX })).toEqual(stale);
    expect(await store.count()).toBe(0);
  });

  it("tells listeners about stored answers until they unsubscribe", async () => {
    const store = open();
    await store.suspend(record("on"), { maxSuspendedRuns: MAX });
    const heardByGone: string[] = [];
    const unsubscribe = store.onAnswer((id) => heardByGone.push(id));
    unsubscribe();
    const heard = new Promise<string>((resolve) => store.onAnswer(resolve));
    expect((await store.addAnswer(SCOPE, ok("on:c1"))).result).toBe("stored");
    expect(await heard).toBe("on");
    expect(heardByGone).toEqual([]);
  });

  it("deletes every run of one scope and nothing else", async () => {
    const store = open();
    const other: StoreScope = { ...SCOPE, agentRunId: "run-2" };
    await store.suspend(record("d1"), { maxSuspendedRuns: MAX });
    await store.suspend(record("d2"), { maxSuspendedRuns: MAX });
    await store.suspend(record("d3", { scope: other }), { maxSuspendedRuns: MAX });
    await claimed(store, "d2");
    expect(await store.deleteScope(SCOPE)).toBe(2);
    expect(await store.claim("d1", SCOPE, LEASE)).toEqual({ ok: false, why: "unavailable" });
    expect(await store.claim("d2", SCOPE, LEASE)).toEqual({ ok: false, why: "unavailable" });
    expect(await store.addAnswer(SCOPE, ok("d1:c1"))).toEqual({ result: "ended", codeModeRunId: "d1" });
    expect(await store.count()).toBe(1);
    expect((await store.claim("d3", other, LEASE)).ok).toBe(true);
    expect(await store.deleteScope(SCOPE)).toBe(0);
  });

  it("stores a checkpoint already claimed by its holder, and keeps the claim across its next checkpoint", async () => {
    const store = open();
    const hold = { token: "live-vm", leaseMs: LEASE, holder: "sidecar-a" };
    expect(await store.suspend(record("cp"), { maxSuspendedRuns: MAX, hold })).toEqual({ ok: true, answeredCallIds: [] });
    // No wait takes a run whose VM lives; answers are kept with it, and its holder reads them.
    expect(await store.claim("cp", SCOPE, LEASE)).toEqual({ ok: false, why: "busy" });
    expect((await store.addAnswer(SCOPE, ok("cp:c1"))).result).toBe("stored");
    expect(plain(await store.answers("cp", "live-vm", new Set()))).toEqual([ok("cp:c1")]);
    // The next checkpoint replaces it at the next generation and still holds it.
    const next = record("cp", { generation: 2, snapshot: Uint8Array.from([9, 9]) });
    expect(await store.suspend(next, { maxSuspendedRuns: MAX, claimToken: "live-vm", hold })).toEqual({ ok: true, answeredCallIds: ["cp:c1"] });
    expect(await store.claim("cp", SCOPE, LEASE)).toEqual({ ok: false, why: "busy" });
    // Its holder's sidecar is gone: a wait resumes it, with the answers kept meanwhile.
    expect(await store.releaseHolder("sidecar-b")).toBe(0);
    expect(await store.releaseHolder("sidecar-a")).toBe(1);
    const { run } = await claimed(store, "cp");
    expect(run.generation).toBe(2);
    expect(Buffer.from(run.snapshot)).toEqual(Buffer.from([9, 9]));
    expect(plain(run.answers)).toEqual([ok("cp:c1")]);
  });

  it("counts a checkpoint against the cap, and refuses a new one on a run id it holds", async () => {
    const store = open();
    const hold = { token: "t", leaseMs: LEASE };
    expect((await store.suspend(record("k1"), { maxSuspendedRuns: 1, hold })).ok).toBe(true);
    expect(await store.suspend(record("k2"), { maxSuspendedRuns: 1, hold })).toEqual({ ok: false, why: "cap" });
    expect(await store.suspend(record("k1", { snapshot: Uint8Array.from([5]) }), { maxSuspendedRuns: 1, hold: { token: "u", leaseMs: LEASE } })).toEqual({
      ok: false,
      why: "claim_lost",
    });
  });

  it("invalidates a claimed run's snapshot: lost for every later wait, its generation moved on, its claim and answers kept", async () => {
    const store = open();
    const hold = { token: "vm", leaseMs: LEASE, holder: "sidecar-a" };
    await store.suspend(record("iv"), { maxSuspendedRuns: MAX, hold });
    expect(await store.invalidate("iv", "other-token", 1)).toBe(false);
    expect(await store.invalidate("iv", "vm", 2)).toBe(false);
    expect(await store.invalidate("iv", "vm", 1)).toBe(true);
    // Sent again (its reply lost): done already.
    expect(await store.invalidate("iv", "vm", 1)).toBe(true);
    // The live VM still takes answers to the calls it awaits, through the store.
    expect((await store.addAnswer(SCOPE, ok("iv:c2"))).result).toBe("stored");
    expect(plain(await store.answers("iv", "vm", new Set()))).toEqual([ok("iv:c2")]);
    // Its VM's sidecar is gone: the run is lost, never resumed, and says so to every wait.
    await store.releaseHolder("sidecar-a");
    expect(await store.claim("iv", SCOPE, LEASE)).toEqual({ ok: false, why: "lost" });
    expect(await store.claim("iv", SCOPE, LEASE)).toEqual({ ok: false, why: "lost" });
    expect(await store.claim("iv", { ...SCOPE, agentRunId: "other" }, LEASE)).toEqual({ ok: false, why: "run" });
    // Its snapshot counts no more.
    expect(await store.bytes()).toBeLessThan(record("iv").snapshot.byteLength + 1_000);
  });

  it("lets the live VM store a checkpoint or a suspension on top of an invalidated one, two generations on", async () => {
    const store = open();
    const hold = { token: "vm", leaseMs: LEASE };
    await store.suspend(record("ov"), { maxSuspendedRuns: MAX, hold });
    expect(await store.invalidate("ov", "vm", 1)).toBe(true);
    expect(await store.suspend(record("ov", { generation: 2 }), { maxSuspendedRuns: MAX, claimToken: "vm", hold })).toEqual({ ok: false, why: "stale" });
    expect((await store.suspend(record("ov", { generation: 3 }), { maxSuspendedRuns: MAX, claimToken: "vm" })).ok).toBe(true);
    const { run } = await claimed(store, "ov");
    expect(run.generation).toBe(3);
  });

  it("releases only the current claims of one holder, of waits as of checkpoints", async () => {
    const store = open();
    await store.suspend(record("h1"), { maxSuspendedRuns: MAX });
    await store.suspend(record("h2"), { maxSuspendedRuns: MAX });
    await store.suspend(record("h3"), { maxSuspendedRuns: MAX, hold: { token: "x", leaseMs: LEASE, holder: "b" } });
    expect((await store.claim("h1", SCOPE, LEASE, "w1", "a")).ok).toBe(true);
    expect((await store.claim("h2", SCOPE, LEASE, "w2", "b")).ok).toBe(true);
    expect(await store.releaseHolder("a")).toBe(1);
    expect((await store.claim("h1", SCOPE, LEASE, "w3")).ok).toBe(true);
    expect(await store.claim("h2", SCOPE, LEASE)).toEqual({ ok: false, why: "busy" });
    // A released claim is gone: its token neither releases nor reads the run.
    expect(await store.release("h1", "w1", true)).toBe(false);
    expect(await store.releaseHolder("b")).toBe(2);
    expect(await store.releaseHolder("b")).toBe(0);
    expect(await store.answers("h2", "w2", new Set())).toBeUndefined();
    expect((await store.claim("h3", SCOPE, LEASE)).ok).toBe(true);
  });

  it("tells a claim in its own scope that a vanished run was lost, any other scope that it is unavailable, until its memory ends", async () => {
    const store = open();
    await store.markVanished([{ codeModeRunId: "v1", scope: SCOPE }], 300);
    expect(await store.claim("v1", SCOPE, LEASE)).toEqual({ ok: false, why: "vanished" });
    expect(await store.claim("v1", { ...SCOPE, sessionKey: "other" }, LEASE)).toEqual({ ok: false, why: "unavailable" });
    expect(await store.claim("v1", { ...SCOPE, agentRunId: "other" }, LEASE)).toEqual({ ok: false, why: "unavailable" });
    // A run stored under the id is unaffected, and a stored run is not marked.
    await store.markVanished([{ codeModeRunId: "v2", scope: SCOPE }], 60_000);
    await store.suspend(record("v2"), { maxSuspendedRuns: MAX });
    expect((await store.claim("v2", SCOPE, LEASE)).ok).toBe(true);
    await store.suspend(record("v3"), { maxSuspendedRuns: MAX });
    await store.markVanished([{ codeModeRunId: "v3", scope: SCOPE }], 60_000);
    const claimed = await store.claim("v3", SCOPE, LEASE);
    expect(claimed.ok).toBe(true);
    if (claimed.ok) expect(await store.release("v3", claimed.token, false)).toBe(true);
    expect(await store.claim("v3", SCOPE, LEASE)).toEqual({ ok: false, why: "unavailable" });
    await until(
      async () => {
        const r = await store.claim("v1", SCOPE, LEASE);
        return !r.ok && r.why === "unavailable";
      },
      "the vanished run to be forgotten",
      { ms: 5_000, everyMs: 100 },
    );
  });
});

describe("redis run store across orchestrators", () => {
  it("lets a restarted orchestrator see the runs and answers the first one stored", async () => {
    const prefix = `test:${randomUUID()}:`;
    const first = redisStore(prefix);
    await first.suspend(record("rr"), { maxSuspendedRuns: MAX });
    expect(await first.addAnswer(SCOPE, ok("rr:c1"))).toEqual({ result: "stored", codeModeRunId: "rr" });

    const restarted = redisStore(prefix);
    const heard = new Promise<string>((resolve) => restarted.onAnswer(resolve));
    // addAnswer waits for the store's own subscription, so first's answer below is heard.
    expect(await restarted.addAnswer(SCOPE, ok("nobody"))).toEqual({ result: "unknown" });
    expect(await restarted.count()).toBe(1);
    const { run, token } = await claimed(restarted, "rr");
    expect(plain(run.answers)).toEqual([ok("rr:c1")]);
    expect(await first.claim("rr", SCOPE, LEASE)).toEqual({ ok: false, why: "busy" });

    expect(await first.addAnswer(SCOPE, ok("rr:c2"))).toEqual({ result: "stored", codeModeRunId: "rr" });
    expect(await heard).toBe("rr");
    expect(plain(await restarted.answers("rr", token, new Set(["rr:c1"])))).toEqual([ok("rr:c2")]);
    await first.close();
    await restarted.close();
  });

  it("keeps a run's generation in its own key, outliving the run by GENERATION_MEMORY_MS past its expiry", async () => {
    const prefix = `test:${randomUUID()}:`;
    const store = redisStore(prefix);
    const raw = new Redis(redis.url);
    try {
      const start = Date.now();
      const expiresAtMs = start + 60_000;
      await store.suspend(record("gk", { expiresAtMs }), { maxSuspendedRuns: MAX });
      const { token } = await claimed(store, "gk", SCOPE, 1_000);
      expect(await store.suspend(record("gk", { generation: 2, expiresAtMs }), { maxSuspendedRuns: MAX, claimToken: token })).toEqual({
        ok: true,
        answeredCallIds: [],
      });
      expect(await raw.get(`${prefix}gen:gk`)).toBe("2");
      const settle = await claimed(store, "gk");
      expect(await store.release("gk", settle.token, false)).toBe(true);
      expect(await raw.exists(`${prefix}run:gk`)).toBe(0);
      expect(await raw.get(`${prefix}gen:gk`)).toBe("2");
      const ttl = await raw.pttl(`${prefix}gen:gk`);
      const read = Date.now();
      // The key expires GENERATION_MEMORY_MS after the run would have: read between `start`
      // and `read`, its TTL lies between what is left of that then (to the millisecond).
      expect(ttl).toBeGreaterThanOrEqual(expiresAtMs + GENERATION_MEMORY_MS - read - 1);
      expect(ttl).toBeLessThanOrEqual(expiresAtMs - start + GENERATION_MEMORY_MS);
    } finally {
      raw.disconnect();
    }
  });

  it("rejects calls while Redis is away instead of hanging, and closes cleanly", async () => {
    const own = await startRedis();
    const store = new RedisRunStore(own.url);
    try {
      expect(await store.count()).toBe(0);
      await own.stop();
      // The store's bounded retries give up: an error, not a hang.
      await expect(store.count()).rejects.toMatchObject({ name: "MaxRetriesPerRequestError" });
      await expect(store.suspend(record("down"), { maxSuspendedRuns: MAX })).rejects.toMatchObject({ name: "MaxRetriesPerRequestError" });
    } finally {
      await store.close();
      await own.stop();
    }
  });
});

describe("createRunStore", () => {
  it("makes the memory store by default", async () => {
    for (const spec of [undefined, "", "memory"]) {
      const store = tracked(await createRunStore(spec));
      expect(store.kind).toBe("memory");
    }
  });

  it("makes a Redis store from a redis:// URL", async () => {
    const store = tracked(await createRunStore(`${redis.url}/1`));
    expect(store.kind).toBe("redis");
    expect(await store.count()).toBe(0);
  });

  it("names an unreachable Redis without its password", async () => {
    const port = await freePort();
    const error = await createRunStore(`redis://:hunter2@127.0.0.1:${port}/0`).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).message).toContain(`redis://127.0.0.1:${port}/0`);
    expect((error as Error).message).not.toContain("hunter2");
  });

  it("refuses anything else", async () => {
    await expect(createRunStore("postgres://db")).rejects.toThrow(/memory.*redis:\/\//);
  });
});

/**
 * The store quotas of a tenant (maxSuspendedBytes, maxStoreBytes), run against both stores
 * (in memory and a real redis-server) so they count and refuse the same way: the bytes a
 * tenant's suspended runs hold add up across its runs, a re-suspension counts without its
 * old self, a run that settles frees its bytes; a tenant's session stores add up across its
 * sessions, and clearing or expiring one frees its bytes. What every replica and sidecar
 * shares is enforced here, in one store call (docs/operations.md#tenants-and-quotas).
 */
import { randomUUID } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import type { Redis } from "ioredis";
import { MemoryRunStore } from "../../src/orchestrator/suspended/memory-store.js";
import { connectRedis, quitRedis, RedisRunStore } from "../../src/orchestrator/suspended/redis-store.js";
import { recordBytes, type RunStore, type StoreScope, type SuspendedRecord } from "../../src/orchestrator/suspended/run-store.js";
import { MemorySessionStore, type SessionStore, type StoreAccount } from "../../src/orchestrator/sessions/session-store.js";
import { RedisSessionStore } from "../../src/orchestrator/sessions/redis-sessions.js";
import { silentLogger } from "../../src/shared/logger.js";
import { startRedis, type RedisServer } from "../helpers/redis.js";
import { until } from "../helpers/until.js";

let redis: RedisServer;
let connection: Redis;
beforeAll(async () => {
  redis = await startRedis();
  connection = connectRedis(redis.url, undefined);
});
afterAll(async () => {
  await quitRedis(connection);
  await redis.stop();
});

const closing: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(closing.splice(0).map((s) => s.close()));
});
function tracked<T extends { close(): Promise<void> }>(store: T): T {
  closing.push(store);
  return store;
}

const SCOPE: StoreScope = { agentId: "agent", sessionId: "session", sessionKey: "key", agentRunId: "run", tenant: "acme" };

function record(id: string, snapshotBytes: number, over: Partial<SuspendedRecord> = {}): SuspendedRecord {
  return {
    codeModeRunId: id,
    scope: SCOPE,
    snapshot: new Uint8Array(snapshotBytes).fill(7),
    pending: [{ callId: `${id}:c1`, kind: "call", toolId: "tool", toolName: "tool" }],
    answers: [],
    reason: "pending_tools",
    configJson: "{}",
    outputBytes: 0,
    expiresAtMs: Date.now() + 60_000,
    catalogVersion: "v1",
    execCallId: `${id}:exec`,
    generation: 1,
    ...over,
  };
}

describe.each([
  { kind: "memory", open: (): RunStore => tracked(new MemoryRunStore()) },
  { kind: "redis", open: (): RunStore => tracked(new RedisRunStore(redis.url, { prefix: `test:${randomUUID()}:tenant:acme:`, connection })) },
])("a tenant's suspended runs in the $kind store", ({ open }) => {
  it("add up against maxSuspendedBytes; a re-suspension counts without its old self; a settled run frees its bytes", async () => {
    const store = open();
    const a = record("a", 1000);
    const b = record("b", 2000, { expiresAtMs: Date.now() + 30_000 });
    const max = recordBytes(a) + recordBytes(b);
    const limits = { maxSuspendedRuns: 100, maxSuspendedBytes: max };
    expect(await store.bytes()).toBe(0);
    expect(await store.nextExpiry()).toBeUndefined();
    expect(await store.suspend(a, limits)).toEqual({ ok: true, answeredCallIds: [] });
    expect(await store.suspend(b, limits)).toEqual({ ok: true, answeredCallIds: [] });
    expect(await store.bytes()).toBe(max);
    expect(await store.nextExpiry()).toBe(b.expiresAtMs);
    expect(await store.suspend(record("c", 1), limits)).toEqual({ ok: false, why: "bytes" });
    expect(await store.count()).toBe(2);
    // A wait re-suspends a at its own size: its old bytes are not counted twice.
    const claim = await store.claim("a", SCOPE, 30_000);
    if (!claim.ok) throw new Error(claim.why);
    expect(await store.suspend(record("a", 1000, { generation: 2 }), { ...limits, claimToken: claim.token })).toEqual({ ok: true, answeredCallIds: [] });
    // ...but it may not grow past the quota.
    const again = await store.claim("a", SCOPE, 30_000);
    if (!again.ok) throw new Error(again.why);
    expect(await store.suspend(record("a", 1001, { generation: 3 }), { ...limits, claimToken: again.token })).toEqual({ ok: false, why: "bytes" });
    expect(await store.release("a", again.token, false)).toBe(true);
    expect(await store.bytes()).toBe(recordBytes(b));
    expect(await store.suspend(record("c", 1), limits)).toEqual({ ok: true, answeredCallIds: [] });
  });

  it("without maxSuspendedBytes, nothing is refused for bytes", async () => {
    const store = open();
    for (const id of ["x", "y"]) expect(await store.suspend(record(id, 100_000), { maxSuspendedRuns: 100 })).toEqual({ ok: true, answeredCallIds: [] });
    expect(await store.bytes()).toBe(2 * recordBytes(record("x", 100_000)));
  });
});

const LIMITS = { maxKeys: 100, maxBytes: 10_000, ttlSeconds: 3600 };
const entry = (key: string, chars: number) => ({ key, json: JSON.stringify("x".repeat(chars)) });

describe.each([
  { kind: "memory", open: (account?: StoreAccount): SessionStore => tracked(new MemorySessionStore(account)) },
  {
    kind: "redis",
    open: (account?: StoreAccount): SessionStore => new RedisSessionStore(connection, silentLogger(), `test:${randomUUID()}:tenant:acme:`, account),
  },
])("a tenant's session stores in the $kind store", ({ open }) => {
  it("add up against maxStoreBytes, and clearing one frees its bytes", async () => {
    let refusals = 0;
    const store = open({ tenant: "acme", maxStoreBytes: 250, refused: () => refusals++ });
    // Each session holds "k" and a 102-byte JSON value: 103 bytes.
    expect(await store.commit("acme:one", [entry("k", 100)], LIMITS)).toEqual({ ok: true, keys: 1, bytes: 103 });
    expect(await store.commit("acme:two", [entry("k", 100)], LIMITS)).toEqual({ ok: true, keys: 1, bytes: 103 });
    // Rewriting a session counts its new size, not both.
    expect(await store.commit("acme:two", [entry("k", 90)], LIMITS)).toEqual({ ok: true, keys: 1, bytes: 93 });
    expect(await store.totalBytes()).toBe(196);
    const refused = await store.commit("acme:three", [entry("k", 100)], LIMITS);
    expect(refused).toMatchObject({ ok: false, keys: 0, bytes: 0 });
    expect(refused.ok === false && refused.refused).toBe(
      `tenant "acme"'s session stores would hold 299 bytes, going over its quota maxStoreBytes (250 bytes); retry once one of its session stores is cleared (ClearSessionStore) or expires`,
    );
    expect(refusals).toBe(1);
    expect(await store.clear("acme:one")).toBe(1);
    expect(await store.totalBytes()).toBe(93);
    expect((await store.commit("acme:three", [entry("k", 100)], LIMITS)).ok).toBe(true);
  });

  it("an expired session frees its bytes", async () => {
    const store = open({ tenant: "acme", maxStoreBytes: 150 });
    expect((await store.commit("acme:short", [entry("k", 100)], { ...LIMITS, ttlSeconds: 1 })).ok).toBe(true);
    expect((await store.commit("acme:next", [entry("k", 100)], LIMITS)).ok).toBe(false);
    await until(async () => (await store.commit("acme:next", [entry("k", 100)], LIMITS)).ok, "the short session to expire", { everyMs: 100 });
    expect(await store.totalBytes()).toBe(103);
  });

  it("without an account, sessions are not added up", async () => {
    const store = open();
    for (const s of ["a", "b", "c"]) expect((await store.commit(`default:${s}`, [entry("k", 1000)], LIMITS)).ok).toBe(true);
    expect(await store.totalBytes()).toBe(0);
  });
});

/**
 * Each tenant's replay records bounded on their own (`maxReplayBytes`), against both stores
 * (in memory and a real redis-server): a tenant past its bound loses its runs with the oldest
 * last segment first and never another tenant's; a run larger than the bound is not kept and
 * takes nothing from others; the bound is logged once per episode, with the tenant; a record
 * that expired stops counting; a tainted run keeps nothing after the taint; 0 keeps nothing.
 * On Redis the keys are under the tenant's prefix, and a record an older build kept under
 * `codemode:replay:` is still read, and counted with its run when the run appends again. A run
 * left with segments after its dropped exec is reported as having no record.
 */
import { Redis } from "ioredis";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RedisReplayRecords } from "../../src/orchestrator/replay/redis-replay-records.js";
import { replayControlHandlers } from "../../src/orchestrator/replay/replay-handlers.js";
import {
  DEFAULT_MAX_REPLAY_BYTES,
  MAX_REPLAY_SEGMENTS,
  MEMORY_MAX_BYTES,
  MemoryReplayRecords,
  replayBytesOf,
  replayKey,
  type ReplayRecords,
} from "../../src/orchestrator/replay/replay-records.js";
import { silentLogger, type Logger } from "../../src/shared/logger.js";
import type { Scope } from "../../src/shared/scope.js";
import { parseTenants } from "../../src/shared/tenants.js";
import { startRedis, type RedisServer } from "../helpers/redis.js";
import { until } from "../helpers/until.js";

let redis: RedisServer;
let connection: Redis;
beforeAll(async () => {
  redis = await startRedis();
  connection = new Redis(redis.url);
});
afterAll(async () => {
  connection.disconnect();
  await redis.stop();
});

type Line = { level: number; msg: string; tenant?: string; dropped?: number };

/** A logger whose lines the test reads. */
function capture(): { log: Logger; lines: Line[] } {
  const lines: Line[] = [];
  const log = pino({ level: "info" }, { write: (s: string) => void lines.push(JSON.parse(s) as Line) }) as unknown as Logger;
  return { log, lines };
}

type Store = ReplayRecords & { bytesHeld(tenant: string): number | Promise<number> };
type Open = (bound: Record<string, number>, log: Logger, ttlMs?: number) => Store;

const STORES: Array<{ name: string; open: Open }> = [
  {
    name: "in memory",
    open: (bound, log, ttlMs) => new MemoryReplayRecords({ bytesOf: (t) => bound[t] ?? 0, log, ...(ttlMs ? { ttlMs } : {}) }),
  },
  {
    name: "in Redis",
    // Each store on a prefix of its own, so the tests share one server.
    open: (bound, log, ttlMs) => new RedisReplayRecords(connection, log, `t${Math.random().toString(36).slice(2)}:`, (t) => bound[t] ?? 0, ttlMs),
  },
];

let n = 0;
const scopeOf = (tenant?: string): Scope => ({ agentId: "a", sessionId: "s", sessionKey: "k", agentRunId: `r${++n}`, ...(tenant ? { tenant } : {}) });
/** A segment record of `bytes` bytes (only its length matters to the store). */
const segment = (bytes: number, tag = "x") => JSON.stringify({ kind: "exec", tag, pad: "p".repeat(Math.max(0, bytes - 31 - tag.length)) }).slice(0, bytes);

describe.each(STORES)("replay records $name", ({ open }) => {
  it("a tenant past its bound loses its oldest runs first; the other tenant keeps every one of its own", async () => {
    const { log, lines } = capture();
    const store = open({ acme: 1000, globex: 1000 }, log);
    const g = scopeOf("globex");
    await store.append(g, "g1", segment(400));
    await store.append(g, "g2", segment(400));
    const acme = Array.from({ length: 6 }, () => scopeOf("acme"));
    await store.append(acme[0]!, "a0", segment(300));
    await store.append(acme[1]!, "a1", segment(300));
    await store.append(acme[2]!, "a2", segment(300));
    // a0 appends again: a1 now has the oldest last segment.
    await store.append(acme[0]!, "a0", segment(50));
    expect(await store.bytesHeld("acme")).toBe(950);
    await store.append(acme[3]!, "a3", segment(300));
    expect((await store.segments(acme[1]!, "a1")).length).toBe(0);
    expect((await store.segments(acme[0]!, "a0")).length).toBe(2);
    expect((await store.segments(acme[2]!, "a2")).length).toBe(1);
    for (let i = 4; i < 6; i++) await store.append(acme[i]!, `a${i}`, segment(300));
    expect(await store.bytesHeld("acme")).toBeLessThanOrEqual(1000);
    expect((await store.segments(acme[5]!, "a5")).length).toBe(1);
    // globex's records are untouched, and so is its total.
    expect(await store.segments(g, "g1")).toEqual([segment(400)]);
    expect(await store.segments(g, "g2")).toEqual([segment(400)]);
    expect(await store.bytesHeld("globex")).toBe(800);
    // Logged once for the episode, naming the tenant; never for globex.
    const warned = lines.filter((l) => l.msg.startsWith("replay records reached the tenant's bound"));
    expect(warned.map((l) => l.tenant)).toEqual(["acme"]);
  });

  it("a run larger than the bound alone is not kept, and takes nothing from the tenant's other runs", async () => {
    const { log } = capture();
    const store = open({ acme: 1000 }, log);
    const small = scopeOf("acme");
    const big = scopeOf("acme");
    await store.append(small, "s", segment(400));
    await store.append(big, "b", segment(1200));
    expect(await store.segments(big, "b")).toEqual([]);
    expect(await store.segments(small, "s")).toEqual([segment(400)]);
    expect(await store.bytesHeld("acme")).toBe(400);
    // A run that grows past the bound goes whole (a record missing a segment would replay as if it had ended).
    const growing = scopeOf("acme");
    await store.append(growing, "g", segment(300));
    await store.append(growing, "g", segment(300));
    await store.append(growing, "g", segment(500));
    expect(await store.segments(growing, "g")).toEqual([]);
    expect(await store.segments(small, "s")).toEqual([segment(400)]);
    expect(await store.bytesHeld("acme")).toBe(400);
  });

  it("a record that expired stops counting: the episode ends, logged once", async () => {
    const { log, lines } = capture();
    const store = open({ acme: 1000 }, log, 300);
    const first = scopeOf("acme");
    const second = scopeOf("acme");
    await store.append(first, "o1", segment(600));
    await store.append(second, "o2", segment(600));
    expect(await store.segments(first, "o1")).toEqual([]);
    await until(async () => (await store.segments(second, "o2")).length === 0, "the second record to expire");
    // The expired record is not counted: a new one fits with nothing dropped, and is all the tenant holds.
    await store.append(scopeOf("acme"), "fresh", segment(100));
    expect(await store.bytesHeld("acme")).toBe(100);
    const msgs = lines.map((l) => l.msg);
    expect(msgs.filter((m) => m.startsWith("replay records reached the tenant's bound")).length).toBe(1);
    expect(lines.filter((l) => l.msg === "replay records are back within the tenant's bound").map((l) => [l.tenant, l.dropped])).toEqual([["acme", 1]]);
  });

  it("keeps nothing after a tainted segment, a run's first segments only, and nothing at all with a bound of 0", async () => {
    const { log } = capture();
    const store = open({ acme: 10_000_000, globex: 0 }, log);
    const s = scopeOf("acme");
    await store.append(s, "t", segment(100));
    await store.append(s, "t", JSON.stringify({ kind: "wait", tape: { tainted: true } }));
    await store.append(s, "t", segment(100, "after"));
    expect((await store.segments(s, "t")).length).toBe(2);
    const many = scopeOf("acme");
    for (let i = 0; i <= MAX_REPLAY_SEGMENTS; i++) await store.append(many, "m", segment(40));
    expect((await store.segments(many, "m")).length).toBe(MAX_REPLAY_SEGMENTS);
    const none = scopeOf("globex");
    await store.append(none, "z", segment(10));
    expect(await store.segments(none, "z")).toEqual([]);
    expect(await store.bytesHeld("globex")).toBe(0);
  });
});

describe("replay records in Redis: keys", () => {
  it("are under the tenant's prefix; a record kept under the old key is read, and counted once its run appends", async () => {
    const { log } = capture();
    const prefix = `k${Math.random().toString(36).slice(2)}:`;
    const store = new RedisReplayRecords(connection, log, prefix, () => 10_000);
    const s = scopeOf("acme");
    await store.append(s, "new", segment(100));
    const keys = await connection.keys(`${prefix}*`);
    expect(keys.length).toBeGreaterThan(0);
    expect(keys.filter((k) => !k.startsWith(`${prefix}tenant:acme:`))).toEqual([]);
    // The default tenant's keys are where they always were.
    const d = scopeOf();
    await store.append(d, "default", segment(100));
    expect(await connection.exists(`${prefix}replay:${replayKey(d, "default")}`)).toBe(1);

    // A record of acme's that a build before the move kept under `<prefix>replay:`.
    const old = scopeOf("acme");
    const legacy = `${prefix}replay:${replayKey(old, "old")}`;
    await connection.rpush(legacy, segment(200, "before"));
    await connection.pexpire(legacy, 60_000);
    expect(await store.segments(old, "old")).toEqual([segment(200, "before")]);
    const held = await store.bytesHeld("acme");
    // Its run goes on: both halves are read in order, and the old half now counts and expires with it.
    await store.append(old, "old", segment(300, "after"));
    expect(await store.segments(old, "old")).toEqual([segment(200, "before"), segment(300, "after")]);
    expect(await store.bytesHeld("acme")).toBe(held + 500);
    expect(await connection.pttl(legacy)).toBeGreaterThan(60_000);
  });
});

describe("a record that lost its start", () => {
  it("a run whose record was dropped while it went on is reported as having no record, saying why", async () => {
    const store = new MemoryReplayRecords({ bytesOf: () => 1000 });
    const s = scopeOf("acme");
    // The exec's record went (the run alone outgrew the bound); the wait after it is kept.
    await store.append(s, "cm_run", segment(900));
    await store.append(s, "cm_run", segment(200));
    await store.append(s, "cm_run", JSON.stringify({ kind: "wait", from: 1, startedAtMs: 2 }));
    const handlers = replayControlHandlers(store, silentLogger(), () => s);
    const wire = { scope: undefined, codeModeRunId: "cm_run" } as never;
    await expect(handlers.getReplayRecord(wire, {} as never)).rejects.toMatchObject({
      code: "not_found",
      message: expect.stringMatching(/no whole replay record is kept for code mode run cm_run: its exec's record is not kept/),
    });
    await expect(handlers.replayRun(wire, {} as never)).rejects.toMatchObject({ code: "not_found" });
  });
});

describe("maxReplayBytes", () => {
  it("defaults to 256 MiB; in memory each tenant gets at most an equal share of the memory store's bound", () => {
    const tenants = parseTenants(
      {
        tenants: [
          { name: "acme", tokenSha256: "a".repeat(64), quotas: { maxReplayBytes: 1_000_000_000 } },
          { name: "globex", tokenSha256: "b".repeat(64), quotas: { maxReplayBytes: 1000 } },
          { name: "initech", tokenSha256: "c".repeat(64) },
          { name: "hooli", tokenSha256: "d".repeat(64) },
        ],
      },
      "test",
    );
    expect(replayBytesOf(tenants, "acme", "redis")).toBe(1_000_000_000);
    expect(replayBytesOf(tenants, "acme", "memory")).toBe(MEMORY_MAX_BYTES / 4);
    expect(replayBytesOf(tenants, "globex", "memory")).toBe(1000);
    expect(replayBytesOf(tenants, "initech", "redis")).toBe(DEFAULT_MAX_REPLAY_BYTES);
    expect(() => parseTenants({ tenants: [{ name: "x", tokenSha256: "e".repeat(64), quotas: { maxReplayBytes: -1 } }] }, "t")).toThrow(
      /quotas\.maxReplayBytes must be a whole number/,
    );
  });
});

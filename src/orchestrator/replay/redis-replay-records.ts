/**
 * Replay records in Redis, with MemoryReplayRecords' semantics: a list per code-mode run,
 * `<tenant prefix>replay:<scope key>:<run id>`, its first MAX_REPLAY_SEGMENTS segments kept,
 * expiring REPLAY_TTL_MS after its last segment, nothing after a tainted segment (a mark key
 * beside the list says so), and each tenant's records bounded in bytes (`maxReplayBytes`),
 * its runs with the oldest last segment dropped first. Shared by orchestrator replicas: every
 * change is one Lua script. A tenant's prefix is its other keys' (../tenants/tenant-state.ts
 * `tenantPrefix`); a build before it kept a named tenant's records under `<prefix>replay:`,
 * which are still read (until they expire), and counted with their run when it appends again.
 */
import type { Redis } from "ioredis";
import type { Logger } from "../../shared/logger.js";
import { tenantOfScope, type Scope } from "../../shared/scope.js";
import { storeCall } from "../state/store-failure.js";
import { tenantPrefix } from "../tenants/tenant-state.js";
import { DEFAULT_MAX_REPLAY_BYTES, isTainted, MAX_REPLAY_SEGMENTS, REPLAY_TTL_MS, ReplayBoundLog, replayKey, type ReplayRecords } from "./replay-records.js";

/**
 * How a tenant's total stays right: its account is `replays:expiry` (zset: run → when its
 * list expires), `replays:bytes` (hash: run → the bytes its lists hold) and `replays:total`,
 * changed only here. Every append reads Redis's own clock (TIME) and gives the run's lists
 * PEXPIREAT the instant that is also the run's score (the tenant's latest score plus one when
 * that is later, so scores order runs by their last segment); it first forgets the runs whose
 * score has passed (Redis drops a key once its time has passed: the same test), so the total
 * never counts an expired list. A list the account does not know (written by an older build,
 * or one that expired in the same millisecond as it was forgotten) is counted when its run
 * appends, by reading its lengths. The account keys expire with the tenant's latest run.
 * (Redis 5 and later replicate a script's effects, so it may read TIME before it writes.)
 * KEYS: 1 the run's list, 2 its taint mark, 3 expiry, 4 bytes, 5 total, 6 the run's legacy list
 * and 7 its legacy mark (1 and 2 again for the default tenant, whose keys never moved); a taint
 * is marked at the legacy name too, so an older replica in a rolling upgrade keeps nothing
 * after it either.
 * ARGV: 1 segment JSON, 2 max segments, 3 ttl ms, 4 "1" when the segment is tainted, 5 the
 * tenant's bound in bytes, 6 the run's member (its replay key), 7 and 8 the list keys' prefix
 * and legacy prefix (a member appended names a run's lists). Returns {status, runs dropped,
 * total}; a Lua string's # is its length in bytes.
 */
const APPEND = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local maxSegs, ttl, bound, member = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[5]), ARGV[6]
local legacy = KEYS[6] ~= KEYS[1]
local cutoff = string.format('(%d', now)
local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', cutoff)
for _, m in ipairs(gone) do
  redis.call('DECRBY', KEYS[5], tonumber(redis.call('HGET', KEYS[4], m) or '0'))
  redis.call('HDEL', KEYS[4], m)
end
if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', cutoff) end
if redis.call('EXISTS', KEYS[2]) == 1 or (legacy and redis.call('EXISTS', KEYS[7]) == 1) then return {'closed', 0, 0} end
local function listBytes(k)
  local n, b = redis.call('LLEN', k), 0
  for i = 0, n - 1, 16 do
    for _, s in ipairs(redis.call('LRANGE', k, i, i + 15)) do b = b + #s end
  end
  return b
end
local function drop(m)
  redis.call('DEL', ARGV[7] .. m)
  if legacy then redis.call('DEL', ARGV[8] .. m) end
  redis.call('HDEL', KEYS[4], m)
  redis.call('ZREM', KEYS[3], m)
end
local c = redis.call('HGET', KEYS[4], member)
local counted = 0
if c then counted = tonumber(c) end
local had = counted
if not c then
  had = listBytes(KEYS[1])
  if legacy then had = had + listBytes(KEYS[6]) end
end
local held = redis.call('LLEN', KEYS[1])
if legacy then held = held + redis.call('LLEN', KEYS[6]) end
local size = 0
if held < maxSegs then size = #ARGV[1] end
local bytes = had + size
if bytes > bound then
  drop(member)
  return {'dropped', 1, redis.call('DECRBY', KEYS[5], counted)}
end
-- The run's new expiry, later than every other run's, so the order of scores is the order of last segments.
local at = now + ttl
local last = redis.call('ZRANGE', KEYS[3], -1, -1, 'WITHSCORES')
if last[2] and tonumber(last[2]) >= at then at = tonumber(last[2]) + 1 end
if size > 0 then redis.call('RPUSH', KEYS[1], ARGV[1]) end
redis.call('PEXPIREAT', KEYS[1], at)
if legacy then redis.call('PEXPIREAT', KEYS[6], at) end
if ARGV[4] == '1' then
  redis.call('SET', KEYS[2], '1', 'PXAT', at)
  if legacy then redis.call('SET', KEYS[7], '1', 'PXAT', at) end
end
redis.call('HSET', KEYS[4], member, bytes)
redis.call('ZADD', KEYS[3], at, member)
local total = redis.call('INCRBY', KEYS[5], bytes - counted)
local dropped = 0
while total > bound do
  local first = redis.call('ZRANGE', KEYS[3], 0, 1)
  local m = first[1]
  if m == member then m = first[2] end
  if not m then break end
  local b = tonumber(redis.call('HGET', KEYS[4], m) or '0')
  drop(m)
  total = redis.call('DECRBY', KEYS[5], b)
  dropped = dropped + 1
end
redis.call('PEXPIREAT', KEYS[3], at)
redis.call('PEXPIREAT', KEYS[4], at)
redis.call('PEXPIREAT', KEYS[5], at)
return {'kept', dropped, total}
`;

export class RedisReplayRecords implements ReplayRecords {
  private readonly bounds: ReplayBoundLog;

  constructor(
    private readonly redis: Redis,
    private readonly log: Logger,
    /** The store's base prefix (REDIS_PREFIX); each tenant's keys are under its own prefix within it. */
    private readonly prefix: string,
    /** The bytes a tenant's records may hold (./replay-records.ts `replayBytesOf`). */
    private readonly bytesOf: (tenant: string) => number = () => DEFAULT_MAX_REPLAY_BYTES,
    /** How long a record is kept after its last segment (tests shorten it). */
    private readonly ttlMs = REPLAY_TTL_MS,
  ) {
    this.bounds = new ReplayBoundLog(log);
  }

  /** The run's list, the legacy one (the same key for the default tenant), and the tenant's list-key and account prefix. */
  private keys(scope: Scope, codeModeRunId: string) {
    const tenant = tenantOfScope(scope);
    const own = tenantPrefix(this.prefix, tenant);
    const member = replayKey(scope, codeModeRunId);
    return { tenant, own, member, list: `${own}replay:${member}`, legacy: `${this.prefix}replay:${member}` };
  }

  async append(scope: Scope, codeModeRunId: string, segmentJson: string): Promise<void> {
    const { tenant, own, member, list, legacy } = this.keys(scope, codeModeRunId);
    const bound = this.bytesOf(tenant);
    // maxReplayBytes 0: the tenant keeps no record.
    if (bound <= 0) return;
    const [status, dropped, total] = (await storeCall(this.log, "keep a replay record", () =>
      this.redis.eval(
        APPEND,
        7,
        list,
        `${list}:tainted`,
        `${own}replays:expiry`,
        `${own}replays:bytes`,
        `${own}replays:total`,
        legacy,
        `${legacy}:tainted`,
        segmentJson,
        MAX_REPLAY_SEGMENTS,
        this.ttlMs,
        isTainted(segmentJson) ? "1" : "0",
        bound,
        member,
        `${own}replay:`,
        `${this.prefix}replay:`,
      ),
    )) as [string, number, number];
    if (status !== "closed") this.bounds.note(tenant, dropped, total, bound, codeModeRunId);
  }

  async segments(scope: Scope, codeModeRunId: string): Promise<string[]> {
    const { list, legacy } = this.keys(scope, codeModeRunId);
    return storeCall(this.log, "read a replay record", async () => {
      if (legacy === list) return this.redis.lrange(list, 0, -1);
      // A named tenant's run may have begun under the legacy key (a build before the move); its segments come first.
      const [before, after] = await Promise.all([this.redis.lrange(legacy, 0, -1), this.redis.lrange(list, 0, -1)]);
      return [...before, ...after];
    });
  }

  /** The bytes `tenant`'s records hold, as its account says (tests). */
  async bytesHeld(tenant: string): Promise<number> {
    return Number((await this.redis.get(`${tenantPrefix(this.prefix, tenant)}replays:total`)) ?? 0);
  }
}

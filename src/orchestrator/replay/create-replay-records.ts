/**
 * Picks where replay records are kept from the store setting: in memory, or in Redis for a
 * redis:// URL, on a connection of their own (the Redis modules are imported only then),
 * each tenant's bounded by its `maxReplayBytes` (./replay-records.ts `replayBytesOf`).
 */
import type { Logger } from "../../shared/logger.js";
import { Tenants } from "../../shared/tenants.js";
import { redisUrlOf } from "../state/create-store.js";
import { redactUrl } from "../state/redact-url.js";
import { MemoryReplayRecords, replayBytesOf, type ReplayRecords } from "./replay-records.js";

/**
 * The replay records for a store setting: in memory, or in Redis for a redis:// URL (on a
 * connection of their own). Keys carry the scope key, which names a tenant other than the
 * default, so one tenant's records are never another's; in Redis they are under the tenant's
 * prefix, with its other keys.
 */
export async function createReplayRecords(
  spec: string | undefined,
  log: Logger,
  timeoutMs?: number,
  tenants: Tenants = Tenants.NONE,
): Promise<{ records: ReplayRecords; close: () => Promise<void> }> {
  const url = redisUrlOf(spec);
  if (url === undefined) return { records: new MemoryReplayRecords({ bytesOf: (t) => replayBytesOf(tenants, t, "memory"), log }), close: async () => {} };
  const [{ connectRedis, quitRedis, REDIS_PREFIX }, { RedisReplayRecords }] = await Promise.all([
    import("../suspended/redis-store.js"),
    import("./redis-replay-records.js"),
  ]);
  const rlog = log.child({ replayRecords: "redis", url: redactUrl(url) });
  const redis = connectRedis(url, rlog, timeoutMs);
  return { records: new RedisReplayRecords(redis, rlog, REDIS_PREFIX, (t) => replayBytesOf(tenants, t, "redis")), close: () => quitRedis(redis) };
}

/**
 * Picks where replay records are kept from the store setting: in memory, or in Redis for a
 * redis:// URL, on a connection of their own (the Redis modules are imported only then).
 */
import type { Logger } from "../../shared/logger.js";
import { redisUrlOf } from "../state/create-store.js";
import { redactUrl } from "../state/redact-url.js";
import { MemoryReplayRecords, type ReplayRecords } from "./replay-records.js";

/**
 * The replay records for a store setting: in memory, or in Redis for a redis:// URL (on a
 * connection of their own). Keys carry the scope key, which names a tenant other than the
 * default, so one tenant's records are never another's.
 */
export async function createReplayRecords(
  spec: string | undefined,
  log: Logger,
  timeoutMs?: number,
): Promise<{ records: ReplayRecords; close: () => Promise<void> }> {
  const url = redisUrlOf(spec);
  if (url === undefined) return { records: new MemoryReplayRecords(), close: async () => {} };
  const [{ connectRedis, quitRedis, REDIS_PREFIX }, { RedisReplayRecords }] = await Promise.all([
    import("../suspended/redis-store.js"),
    import("./redis-replay-records.js"),
  ]);
  const rlog = log.child({ replayRecords: "redis", url: redactUrl(url) });
  const redis = connectRedis(url, rlog, timeoutMs);
  return { records: new RedisReplayRecords(redis, rlog, REDIS_PREFIX), close: () => quitRedis(redis) };
}

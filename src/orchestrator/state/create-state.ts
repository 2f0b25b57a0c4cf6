/**
 * The orchestrator's gateway-facing state, catalogs, open runs, namespaces and session stores, picked by the same
 * setting as the suspended-run store: in memory by default (lost on restart), or in
 * Redis for a redis:// URL (shared by replicas, surviving a restart), on a connection
 * of its own with the run store's options, checked with a PING at startup. The Redis
 * modules (and ioredis) are imported only for a redis:// setting.
 */
import type { Redis } from "ioredis";
import type { Logger } from "../../shared/logger.js";
import { MemoryCatalogStore, type CatalogStore } from "../catalog/catalog-store.js";
import { MemoryNamespaceRegistry, type NamespaceRegistry } from "../namespaces/namespace-registry.js";
import { MemoryRunRegistry, type RunRegistry } from "../runs/runs.js";
import { MemorySessionStore, type SessionStore } from "../sessions/session-store.js";
import { checkRedis, redisUrlOf } from "./create-store.js";
import { redactUrl } from "./redact-url.js";

export type OrchestratorState = {
  kind: "memory" | "redis";
  catalogs: CatalogStore;
  runs: RunRegistry;
  namespaces: NamespaceRegistry;
  sessions: SessionStore;
  /** The Redis connection the state is written on (a redis:// setting only). */
  connection?: Redis;
  close(): Promise<void>;
};

export async function createOrchestratorState(spec: string | undefined, log: Logger, timeoutMs?: number): Promise<OrchestratorState> {
  const url = redisUrlOf(spec);
  if (url === undefined) {
    const sessions = new MemorySessionStore();
    return {
      kind: "memory",
      catalogs: new MemoryCatalogStore(),
      runs: new MemoryRunRegistry(),
      namespaces: new MemoryNamespaceRegistry(),
      sessions,
      close: () => sessions.close(),
    };
  }
  const [{ connectRedis, quitRedis, REDIS_PREFIX }, { RedisCatalogStore }, { RedisNamespaceRegistry }, { RedisRunRegistry }, { RedisSessionStore }] =
    await Promise.all([
      import("../suspended/redis-store.js"),
      import("../catalog/redis-catalogs.js"),
      import("../namespaces/redis-namespaces.js"),
      import("../runs/redis-runs.js"),
      import("../sessions/redis-sessions.js"),
    ]);
  const stateLog = log.child({ state: "redis", url: redactUrl(url) });
  const redis = connectRedis(url, stateLog, timeoutMs);
  const close = () => quitRedis(redis);
  await checkRedis(url, () => redis.ping(), close);
  return {
    kind: "redis",
    catalogs: new RedisCatalogStore(redis, stateLog, REDIS_PREFIX),
    runs: new RedisRunRegistry(redis, stateLog, REDIS_PREFIX),
    namespaces: new RedisNamespaceRegistry(redis, stateLog, REDIS_PREFIX),
    sessions: new RedisSessionStore(redis, stateLog, REDIS_PREFIX),
    connection: redis,
    close,
  };
}

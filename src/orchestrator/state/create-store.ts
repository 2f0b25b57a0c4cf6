/**
 * Picks the suspended-run store from one setting: nothing or "memory" for the embedded
 * in-process store, a redis:// or rediss:// URL for the Redis store shared by replicas.
 * A Redis store is checked with a PING, so a wrong URL fails at startup, not at first use.
 * The orchestrator's other state (catalogs, open runs) follows the same setting.
 * The Redis store (and ioredis) must be imported only for a redis:// setting.
 */
import type { Logger } from "../../shared/logger.js";
import { MemoryRunStore } from "../suspended/memory-store.js";
import { redactUrl } from "./redact-url.js";
import type { RunStore } from "../suspended/run-store.js";

/** The Redis URL of a store setting, or undefined for the in-memory store; throws for anything else. */
export function redisUrlOf(spec: string | undefined): string | undefined {
  if (spec === undefined || spec === "" || spec === "memory") return undefined;
  if (!spec.startsWith("redis://") && !spec.startsWith("rediss://")) {
    throw new Error(`unsupported run store ${redactUrl(spec)}: use "memory" or a URL redis://host:port[/db] (rediss:// for TLS)`);
  }
  return spec;
}

/** Resolves once `ping` does; otherwise closes and rejects naming the (redacted) URL. */
export async function checkRedis(url: string, ping: () => Promise<unknown>, close: () => Promise<void>): Promise<void> {
  try {
    await ping();
  } catch (err) {
    await close();
    throw new Error(`cannot reach the Redis run store at ${redactUrl(url)}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
}

export async function createRunStore(spec: string | undefined, log?: Logger, timeoutMs?: number): Promise<RunStore> {
  const url = redisUrlOf(spec);
  if (url === undefined) return new MemoryRunStore(log);
  const { RedisRunStore } = await import("../suspended/redis-store.js");
  const store = new RedisRunStore(url, { ...(log ? { log } : {}), ...(timeoutMs !== undefined ? { timeoutMs } : {}) });
  await checkRedis(
    url,
    () => store.ping(),
    () => store.close(),
  );
  return store;
}

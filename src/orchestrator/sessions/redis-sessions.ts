/**
 * The session store in Redis, with MemorySessionStore's semantics: a session is a hash of
 * key → value JSON and a small meta hash (bytes, expiry), both expiring together its TTL
 * after the last write. A commit is one Lua script, so orchestrator replicas never see
 * half of one and limits hold under concurrent cells. Keys: `<prefix>session:<name>` and
 * `<prefix>sessionmeta:<name>`, where the name starts with the tenant.
 */
import type { Redis } from "ioredis";
import type { Logger } from "../../shared/logger.js";
import { storeCall } from "../state/store-failure.js";
import type { CommitResult, SessionEntry, SessionInfo, SessionLimits, SessionStore } from "./session-store.js";

/** KEYS: values, meta. ARGV: 1 now, 2 maxKeys, 3 maxBytes, 4 ttl ms, then (key, json) pairs. Lua's # is a string's byte length. */
const COMMIT = `
local h, m = KEYS[1], KEYS[2]
local now, maxKeys, maxBytes, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local held = redis.call('HLEN', h)
local had = tonumber(redis.call('HGET', m, 'bytes') or '0')
if held == 0 then had = 0 end
local keys, bytes = held, had
for i = 5, #ARGV, 2 do
  local old = redis.call('HGET', h, ARGV[i])
  if old then bytes = bytes - #ARGV[i] - #old else keys = keys + 1 end
  bytes = bytes + #ARGV[i] + #ARGV[i + 1]
end
if keys > maxKeys then return {'keys', keys, bytes, held, had} end
if bytes > maxBytes then return {'bytes', keys, bytes, held, had} end
for i = 5, #ARGV, 2 do redis.call('HSET', h, ARGV[i], ARGV[i + 1]) end
redis.call('HSET', m, 'bytes', bytes, 'exp', now + ttl)
redis.call('PEXPIRE', h, ttl)
redis.call('PEXPIRE', m, ttl)
return {'ok', keys, bytes, held, had}
`;

export class RedisSessionStore implements SessionStore {
  constructor(
    private readonly redis: Redis,
    private readonly log: Logger,
    private readonly prefix: string,
  ) {}

  private keys(session: string): [string, string] {
    return [`${this.prefix}session:${session}`, `${this.prefix}sessionmeta:${session}`];
  }

  async load(session: string): Promise<SessionEntry[]> {
    const [h] = this.keys(session);
    const all = await storeCall(this.log, "read a session store", () => this.redis.hgetall(h));
    return sorted(all);
  }

  async commit(session: string, writes: readonly SessionEntry[], limits: SessionLimits): Promise<CommitResult> {
    const [h, m] = this.keys(session);
    const args = [Date.now(), limits.maxKeys, limits.maxBytes, limits.ttlSeconds * 1000, ...writes.flatMap((w) => [w.key, w.json])];
    const reply = (await storeCall(this.log, "write a session store", () => this.redis.eval(COMMIT, 2, h, m, ...args))) as [
      string,
      number,
      number,
      number,
      number,
    ];
    const [status, keys, bytes, held, had] = reply;
    if (status === "ok") return { ok: true, keys, bytes };
    const limit = status === "keys" ? `${keys} keys, over maxSessionKeys (${limits.maxKeys})` : `${bytes} bytes, over maxSessionBytes (${limits.maxBytes})`;
    return { ok: false, refused: `the session store would hold ${limit}`, keys: held, bytes: had };
  }

  async info(session: string): Promise<SessionInfo> {
    const [h, m] = this.keys(session);
    const [all, meta] = await storeCall(this.log, "read a session store", () => Promise.all([this.redis.hgetall(h), this.redis.hmget(m, "bytes", "exp")]));
    const entries = sorted(all);
    if (entries.length === 0) return { entries, bytes: 0, expiresAtMs: 0 };
    return { entries, bytes: Number(meta[0] ?? 0), expiresAtMs: Number(meta[1] ?? 0) };
  }

  async clear(session: string): Promise<number> {
    const [h, m] = this.keys(session);
    const [[, n]] = (await storeCall(this.log, "clear a session store", () => this.redis.multi().hlen(h).del(h, m).exec())) as [[unknown, number], unknown];
    return n;
  }

  async close(): Promise<void> {}
}

function sorted(all: Record<string, string>): SessionEntry[] {
  return Object.keys(all)
    .sort()
    .map((key) => ({ key, json: all[key]! }));
}

/**
 * The session store in Redis, with MemorySessionStore's semantics: a session is a hash of
 * key → value JSON and a small meta hash (bytes, expiry), both expiring together its TTL
 * after the last write. A commit is one Lua script, so orchestrator replicas never see
 * half of one and limits hold under concurrent cells. Keys: `<prefix>session:<name>` and
 * `<prefix>sessionmeta:<name>`, where the name starts with the tenant; a tenant's store
 * (an account) also keeps `<prefix>sessions:expiry` (zset), `<prefix>sessions:bytes` (hash)
 * and `<prefix>sessions:total` (its sessions' bytes, for `maxStoreBytes`), pruned as they expire.
 */
import type { Redis } from "ioredis";
import type { Logger } from "../../shared/logger.js";
import { storeCall } from "../state/store-failure.js";
import type { CommitResult, SessionEntry, SessionInfo, SessionLimits, SessionStore, StoreAccount } from "./session-store.js";
import { storeBytesRefusal } from "../tenants/store-quotas.js";

/**
 * KEYS: values, meta, then the account's expiry zset, bytes hash and total. ARGV: 1 now,
 * 2 maxKeys, 3 maxBytes, 4 ttl ms, 5 "1" to keep the account, 6 maxStoreBytes (-1: none),
 * 7 the session's name, then (key, json) pairs. Lua's # is a string's byte length.
 */
const COMMIT = `
local h, m = KEYS[1], KEYS[2]
local now, maxKeys, maxBytes, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local account, quota, name = ARGV[5] == '1', tonumber(ARGV[6]), ARGV[7]
local counted = 0
if account then
  local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)
  for _, s in ipairs(gone) do
    redis.call('DECRBY', KEYS[5], tonumber(redis.call('HGET', KEYS[4], s) or '0'))
    redis.call('HDEL', KEYS[4], s)
  end
  if #gone > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now) end
  counted = tonumber(redis.call('HGET', KEYS[4], name) or '0')
end
local held = redis.call('HLEN', h)
local had = tonumber(redis.call('HGET', m, 'bytes') or '0')
if held == 0 then had = 0 end
local keys, bytes = held, had
for i = 8, #ARGV, 2 do
  local old = redis.call('HGET', h, ARGV[i])
  if old then bytes = bytes - #ARGV[i] - #old else keys = keys + 1 end
  bytes = bytes + #ARGV[i] + #ARGV[i + 1]
end
if keys > maxKeys then return {'keys', keys, bytes, held, had} end
if bytes > maxBytes then return {'bytes', keys, bytes, held, had} end
if account and quota >= 0 then
  local total = tonumber(redis.call('GET', KEYS[5]) or '0') - counted + bytes
  if total > quota then return {'account', keys, total, held, had} end
end
for i = 8, #ARGV, 2 do redis.call('HSET', h, ARGV[i], ARGV[i + 1]) end
if account then
  redis.call('INCRBY', KEYS[5], bytes - counted)
  redis.call('HSET', KEYS[4], name, bytes)
  redis.call('ZADD', KEYS[3], now + ttl, name)
end
redis.call('HSET', m, 'bytes', bytes, 'exp', now + ttl)
redis.call('PEXPIRE', h, ttl)
redis.call('PEXPIRE', m, ttl)
return {'ok', keys, bytes, held, had}
`;

/** KEYS: values, meta, the account's expiry zset, bytes hash and total. ARGV: 1 the session's name. Returns the keys it held. */
const CLEAR = `
local n = redis.call('HLEN', KEYS[1])
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('DECRBY', KEYS[5], tonumber(redis.call('HGET', KEYS[4], ARGV[1]) or '0'))
redis.call('HDEL', KEYS[4], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return n
`;

export class RedisSessionStore implements SessionStore {
  constructor(
    private readonly redis: Redis,
    private readonly log: Logger,
    private readonly prefix: string,
    /** A tenant's store: its sessions' bytes are counted together (`maxStoreBytes`). */
    private readonly account?: StoreAccount,
  ) {}

  /** The account's keys: expiry zset, bytes hash, total. */
  private accountKeys(): [string, string, string] {
    return [`${this.prefix}sessions:expiry`, `${this.prefix}sessions:bytes`, `${this.prefix}sessions:total`];
  }

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
    const account = this.account ? ["1", this.account.maxStoreBytes ?? -1] : ["0", -1];
    const args = [Date.now(), limits.maxKeys, limits.maxBytes, limits.ttlSeconds * 1000, ...account, session, ...writes.flatMap((w) => [w.key, w.json])];
    const reply = (await storeCall(this.log, "write a session store", () => this.redis.eval(COMMIT, 5, h, m, ...this.accountKeys(), ...args))) as [
      string,
      number,
      number,
      number,
      number,
    ];
    const [status, keys, bytes, held, had] = reply;
    if (status === "ok") return { ok: true, keys, bytes };
    if (status === "account") {
      this.account?.refused?.();
      return { ok: false, refused: storeBytesRefusal(this.account!.tenant, this.account!.maxStoreBytes ?? 0, bytes), keys: held, bytes: had };
    }
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
    if (this.account) return Number(await storeCall(this.log, "clear a session store", () => this.redis.eval(CLEAR, 5, h, m, ...this.accountKeys(), session)));
    const [[, n]] = (await storeCall(this.log, "clear a session store", () => this.redis.multi().hlen(h).del(h, m).exec())) as [[unknown, number], unknown];
    return n;
  }

  async totalBytes(): Promise<number> {
    if (!this.account) return 0;
    return Number((await storeCall(this.log, "read a session store", () => this.redis.get(this.accountKeys()[2]))) ?? 0);
  }

  async close(): Promise<void> {}
}

function sorted(all: Record<string, string>): SessionEntry[] {
  return Object.keys(all)
    .sort()
    .map((key) => ({ key, json: all[key]! }));
}

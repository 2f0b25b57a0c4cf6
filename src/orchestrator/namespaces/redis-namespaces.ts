/**
 * Internal namespace registrations kept in Redis, so every orchestrator sharing the
 * Redis (and one restarted) installs the same namespaces in the same runs.
 *
 * Keys, under the shared prefix (`codemode:`):
 *   namespaces        hash: namespace id → registration JSON
 *   namespaces:gen    string: a counter bumped by every change
 * Changes are Lua scripts (check collisions and write in one step, so two replicas
 * cannot both take one globalName). Readers cache the registrations by generation: a
 * resolve costs one GET while nothing changes.
 */
import type { Redis } from "ioredis";
import type { Logger } from "../../shared/logger.js";
import { ServiceError } from "../../protocol/service-error.js";
import type { CheckedNamespace } from "./namespace-rules.js";
import { collision, type NamespaceRegistry, type NamespaceSnapshot } from "./namespace-registry.js";
import { storeCall } from "../state/store-failure.js";

/**
 * KEYS: 1 hash, 2 generation. ARGV: 1 id, 2 JSON, 3 generation the caller checked against.
 * Returns -1 when the registry changed since the caller's check, else 1 (replaced) or 0.
 */
const REGISTER = `
local gen = redis.call('GET', KEYS[2]) or '0'
if gen ~= ARGV[3] then return -1 end
local replaced = redis.call('HEXISTS', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('INCR', KEYS[2])
return replaced
`;

/** KEYS: 1 hash, 2 generation. ARGV: ids to delete. */
const CLEAR = `
local n = 0
for i = 1, #ARGV do n = n + redis.call('HDEL', KEYS[1], ARGV[i]) end
if n > 0 then redis.call('INCR', KEYS[2]) end
return n
`;

const MAX_ATTEMPTS = 5;

export class RedisNamespaceRegistry implements NamespaceRegistry {
  private cached: NamespaceSnapshot | undefined;

  constructor(
    private readonly redis: Redis,
    private readonly log: Logger,
    private readonly prefix: string,
  ) {}

  private get hashKey(): string {
    return `${this.prefix}namespaces`;
  }

  private get genKey(): string {
    return `${this.prefix}namespaces:gen`;
  }

  async register(ns: CheckedNamespace): Promise<{ replaced: boolean }> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const snap = await this.snapshot();
      const refusal = collision(snap.namespaces, ns);
      if (refusal) throw refusal;
      const r = (await storeCall(this.log, "register the namespace", () =>
        this.redis.eval(REGISTER, 2, this.hashKey, this.genKey, ns.id, JSON.stringify(ns), snap.generation),
      )) as number;
      if (r >= 0) return { replaced: r === 1 };
    }
    throw new ServiceError("unavailable", "the namespace registry kept changing; retry the registration");
  }

  async clear(pluginId: string): Promise<number> {
    const snap = await this.snapshot();
    const ids = snap.namespaces.filter((n) => n.pluginId === pluginId).map((n) => n.id);
    if (ids.length === 0) return 0;
    return (await storeCall(this.log, "clear the plugin's namespaces", () => this.redis.eval(CLEAR, 2, this.hashKey, this.genKey, ...ids))) as number;
  }

  async snapshot(): Promise<NamespaceSnapshot> {
    const generation = (await storeCall(this.log, "read the namespace generation", () => this.redis.get(this.genKey))) ?? "0";
    if (this.cached?.generation === generation) return this.cached;
    const all = await storeCall(this.log, "read the namespaces", () => this.redis.hgetall(this.hashKey));
    const namespaces = Object.keys(all)
      .sort()
      .map((id) => JSON.parse(all[id]!) as CheckedNamespace);
    // A change between the two reads shows up as a newer generation at the next read.
    this.cached = { generation, namespaces };
    return this.cached;
  }
}

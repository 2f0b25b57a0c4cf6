/**
 * Open runs kept in Redis, so a restarted orchestrator, or another replica on the same
 * Redis, resolves a run a gateway opened elsewhere with the same view, policy, config,
 * counters and trajectory. The view is stored as computed at OpenRun, never recomputed.
 *
 * Keys, under the shared prefix (`codemode:`), by the run's full scope key:
 *   openrun:<scope>     hash: `spec` (RunSpec JSON), the counters search, describe, call
 *                       (absent reads as 0), and `state:<name>` fields noted once per change
 *   trajectory:<scope>  list: step JSON, oldest first, at most MAX_STEPS
 *   resolved:<scope>    hash: call id → how a call a step lists as pending was settled while
 *                       the run was suspended (applied when read: steps are never rewritten)
 * No TTL: a run stays until CloseRun deletes its keys, as in the in-memory registry.
 * Concurrent segments from any replicas all count, and one recorded after CloseRun
 * creates nothing (docs/module-notes.md#srcorchestratorrunsredis-runsts).
 */
import type { Redis } from "ioredis";
import type { Logger } from "../../shared/logger.js";
import { scopeKeyOf } from "../../shared/scope.js";
import {
  applyResolved,
  MAX_STEPS,
  type Counters,
  type OpenRun,
  type ResolvedCall,
  type RunRegistry,
  type RunSpec,
  type Scope,
  type TrajectoryStepRecord,
} from "./runs.js";
import { storeCall } from "../state/store-failure.js";

/**
 * KEYS: 1 openrun, 2 trajectory, 3 resolved. ARGV: 1-3 search/describe/call deltas, 4 step
 * JSON, 5 steps kept, then pairs of resolved call id and resolution JSON.
 */
const RECORD = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[1], 'search', ARGV[1])
redis.call('HINCRBY', KEYS[1], 'describe', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'call', ARGV[3])
redis.call('RPUSH', KEYS[2], ARGV[4])
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[5]), -1)
for i = 6, #ARGV, 2 do redis.call('HSET', KEYS[3], ARGV[i], ARGV[i + 1]) end
return 1
`;

/**
 * KEYS: 1 openrun, 2 trajectory. ARGV: 1 state field, 2 its new value, 3 step JSON, 4 steps
 * kept. Appends the step only when the state changes (absent reads as "").
 */
const RECORD_CHANGE = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local current = redis.call('HGET', KEYS[1], ARGV[1])
if current == false then current = '' end
if current == ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('RPUSH', KEYS[2], ARGV[3])
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[4]), -1)
return 1
`;

/** KEYS: 1 openrun. ARGV: 1 the spec JSON expected, 2 the spec JSON to set. */
const REPLACE_SPEC = `
if redis.call('HGET', KEYS[1], 'spec') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'spec', ARGV[2])
return 1
`;

export class RedisRunRegistry implements RunRegistry {
  constructor(
    private readonly redis: Redis,
    private readonly log: Logger,
    private readonly prefix: string,
  ) {}

  async open(spec: RunSpec): Promise<void> {
    const { run } = this.keys(spec.scope);
    await storeCall(this.log, "open the run", () => this.redis.hset(run, "spec", JSON.stringify(spec)));
  }

  async get(scope: Scope): Promise<OpenRun | undefined> {
    const { run } = this.keys(scope);
    const [spec, search, describe, call] = await storeCall(this.log, "read the run", () => this.redis.hmget(run, "spec", "search", "describe", "call"));
    if (spec === null || spec === undefined) return undefined;
    return { ...(JSON.parse(spec) as RunSpec), counters: { search: Number(search ?? 0), describe: Number(describe ?? 0), call: Number(call ?? 0) } };
  }

  async trajectory(scope: Scope): Promise<TrajectoryStepRecord[] | undefined> {
    const { run, trajectory } = this.keys(scope);
    const [open, steps, resolved] = await storeCall(this.log, "read the trajectory", async () => {
      const replies = await this.redis.multi().exists(run).lrange(trajectory, 0, -1).hgetall(this.keys(scope).resolved).exec();
      if (!replies) throw new Error("the trajectory read was aborted");
      return replies.map(([err, reply]) => {
        if (err) throw err;
        return reply;
      });
    });
    if (open !== 1) return undefined;
    const out = (steps as string[]).map((s) => JSON.parse(s) as TrajectoryStepRecord);
    const byCall = resolved as Record<string, string>;
    applyResolved(
      out,
      Object.keys(byCall).map((callId) => ({ callId, ...(JSON.parse(byCall[callId]!) as Omit<ResolvedCall, "callId">) })),
    );
    return out;
  }

  async record(scope: Scope, step: TrajectoryStepRecord, deltas: Counters, resolved: readonly ResolvedCall[] = []): Promise<void> {
    const { run, trajectory, resolved: resolvedKey } = this.keys(scope);
    const pairs = resolved.flatMap(({ callId, ...r }) => [callId, JSON.stringify(r)]);
    await storeCall(this.log, "record the segment", () =>
      this.redis.eval(RECORD, 3, run, trajectory, resolvedKey, deltas.search, deltas.describe, deltas.call, JSON.stringify(step), MAX_STEPS, ...pairs),
    );
  }

  async recordChange(scope: Scope, state: string, value: string, step: TrajectoryStepRecord): Promise<boolean> {
    const { run, trajectory } = this.keys(scope);
    const changed = await storeCall(this.log, "record the run's state change", () =>
      this.redis.eval(RECORD_CHANGE, 2, run, trajectory, `state:${state}`, value, JSON.stringify(step), MAX_STEPS),
    );
    return changed === 1;
  }

  async replaceSpec(current: RunSpec, next: RunSpec): Promise<boolean> {
    const { run } = this.keys(current.scope);
    // `get` parsed the stored JSON, which JSON.stringify writes back byte for byte.
    const replaced = await storeCall(this.log, "update the run", () => this.redis.eval(REPLACE_SPEC, 1, run, JSON.stringify(current), JSON.stringify(next)));
    return replaced === 1;
  }

  async close(scope: Scope): Promise<boolean> {
    const { run, trajectory, resolved } = this.keys(scope);
    return (await storeCall(this.log, "close the run", () => this.redis.del(run, trajectory, resolved))) > 0;
  }

  private keys(scope: Scope): { run: string; trajectory: string; resolved: string } {
    const key = scopeKeyOf(scope);
    return { run: `${this.prefix}openrun:${key}`, trajectory: `${this.prefix}trajectory:${key}`, resolved: `${this.prefix}resolved:${key}` };
  }
}

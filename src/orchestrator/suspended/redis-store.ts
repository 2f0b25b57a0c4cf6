/**
 * The Redis RunStore: shared by orchestrator replicas and surviving an orchestrator restart,
 * with MemoryRunStore's semantics exactly. Every multi-key change is one Lua script
 * (./redis-scripts.ts); times come from the orchestrator's clock (Date.now()), and PEXPIRE
 * lets Redis drop what expired. Keys, under a prefix (default REDIS_PREFIX), and the channel
 * `<prefix>answers` (stored answers' run ids):
 *   runs            sorted set: run id → expiresAtMs (the cap and count())
 *   run:<id>        hash: meta, pending, snap, exp, scope, session, runid, token, lease, holder, apto, bytes, lost
 *   answers:<id>    hash: call id → stored answer JSON (or approval mark JSON)
 *   calls:<id>      set: every call id the run has awaited
 *   call:<callId>   hash: run, scope, state, until, asked; outlives its run by SETTLED_CALL_MEMORY_MS
 *   scope:<scope>   set: run ids of one scope (deleteScope)
 *   gen:<id>        string: the run's generation, kept GENERATION_MEMORY_MS past its last expiry
 *   holder:<id>     set: run ids a sidecar claimed (releaseHolder); vanished:<id>: markVanished
 */
import { randomUUID } from "node:crypto";
import { Redis, type RedisOptions } from "ioredis";
import type { Logger } from "../../shared/logger.js";
import { scripts } from "./redis-scripts.js";
import { storeOutage } from "../state/store-failure.js";
import { LIMITS } from "../../shared/limits.js";
import { redactUrl } from "../state/redact-url.js";
import {
  scopeKeyOf,
  type AnswerResult,
  type ClaimResult,
  type Hold,
  type PendingEntry,
  type RunStore,
  type StoreScope,
  type StoredAnswer,
  type SuspendedRecord,
  type SuspendResult,
  isStoredMark,
  recordBytes,
  seenKey,
} from "./run-store.js";

export type RedisRunStoreOptions = {
  prefix?: string;
  log?: Logger;
  /** The bound of one command (the store's `--store-timeout-ms`). */
  timeoutMs?: number;
  /** A connection to use instead of one of its own (a tenant's store shares it: ../tenants/tenant-state.ts); its owner closes it. */
  connection?: Redis;
};

/** The key prefix of every store kept in Redis. */
export const REDIS_PREFIX = "codemode:";

/** Everything of a record that is neither bytes, a list the scripts read, nor expiry. */
type Meta = Pick<SuspendedRecord, "scope" | "reason" | "configJson" | "outputBytes" | "catalogVersion" | "execCallId">;

/** Fail fast while Redis is away: a call rejects within seconds instead of queueing forever. */
const CONNECTION: RedisOptions = { maxRetriesPerRequest: 2, enableOfflineQueue: true, connectTimeout: 2_000, commandTimeout: 5_000 };

/**
 * A connection with the store's fail-fast options (shared with the orchestrator's other
 * Redis state), a command bounded by `timeoutMs`. It connects in the background; its
 * connection errors are logged, never thrown: its calls reject instead.
 */
export function connectRedis(url: string, log: Logger | undefined, timeoutMs?: number): Redis {
  const bound = timeoutMs !== undefined ? { commandTimeout: timeoutMs, connectTimeout: timeoutMs } : {};
  return watchRedis(new Redis(url, { ...CONNECTION, ...bound }), log);
}

/** Logs a connection's errors once per outage (its reconnect attempts repeat them), and its return. */
function watchRedis(connection: Redis, log: Logger | undefined): Redis {
  let failing = false;
  return connection
    .on("error", (err: unknown) => {
      if (failing) return;
      failing = true;
      log?.warn({ err }, "redis connection error; reconnecting (repeats are not logged)");
      // A lost connection is an outage even before a call needs the store (health follows it).
      if (log) storeOutage.failed(log, "keep its connection", err);
    })
    .on("ready", () => {
      if (!failing) return;
      failing = false;
      log?.info("redis connection is back");
    });
}

/** Closes a connection politely, or drops it when Redis does not answer. */
export async function quitRedis(connection: Redis): Promise<void> {
  await connection.quit().catch(() => connection.disconnect());
}

export { redactUrl } from "../state/redact-url.js";

/**
 * addAnswer waits until this store's answer subscription is active (once a listener is
 * registered), so a listener registered before an addAnswer on the same store sees it.
 */
export class RedisRunStore implements RunStore {
  readonly kind = "redis";
  private readonly redis: Redis;
  private readonly prefix: string;
  private readonly log: Logger | undefined;
  private readonly listeners = new Set<(codeModeRunId: string) => void>();
  private subscriber: Redis | undefined;
  private subscribing: Promise<void> | undefined;
  /** False when the connection is borrowed (its owner closes it). */
  private readonly ownsConnection: boolean;

  /** `url`: redis://host:port[/db] or rediss://…; connects in the background. */
  constructor(url: string, options: RedisRunStoreOptions = {}) {
    this.prefix = options.prefix ?? REDIS_PREFIX;
    this.log = options.log?.child({ store: "redis", url: redactUrl(url) });
    this.ownsConnection = options.connection === undefined;
    this.redis = options.connection ?? connectRedis(url, this.log, options.timeoutMs);
  }

  /** Resolves once Redis answers a PING. */
  async ping(): Promise<void> {
    await this.redis.ping();
  }

  async suspend(
    record: SuspendedRecord,
    options: { maxSuspendedRuns: number; maxSuspendedBytes?: number; claimToken?: string; hold?: Hold },
  ): Promise<SuspendResult> {
    const { scope, pending, snapshot } = record;
    const meta: Meta = {
      scope,
      reason: record.reason,
      configJson: record.configJson,
      outputBytes: record.outputBytes,
      catalogVersion: record.catalogVersion,
      execCallId: record.execCallId,
    };
    const [status, ...answered] = buffers(
      await scripts.suspend.run(this.redis, [
        this.prefix,
        Date.now(),
        record.codeModeRunId,
        scopeKeyOf(scope),
        sessionKeyOf(scope),
        scope.agentRunId,
        Math.ceil(record.expiresAtMs),
        JSON.stringify(meta),
        JSON.stringify(pending),
        Buffer.from(snapshot.buffer, snapshot.byteOffset, snapshot.byteLength),
        options.maxSuspendedRuns,
        options.claimToken === undefined ? "new" : "replace",
        options.claimToken ?? "",
        record.generation,
        pending.length,
        record.approvalTimeoutMs ?? LIMITS.approvalTimeoutMs.default,
        recordBytes(record),
        options.maxSuspendedBytes ?? -1,
        options.hold?.token ?? "",
        Math.ceil(options.hold?.leaseMs ?? 0),
        options.hold?.holder ?? "",
        ...pending.map((p) => p.callId),
        ...record.answers.flatMap((a) => [a.callId, JSON.stringify(a), isStoredMark(a) ? Math.ceil(a.approval.expiresAtMs) : 0]),
      ]),
    );
    const why = text(status);
    if (why === "cap" || why === "bytes" || why === "claim_lost" || why === "stale") return { ok: false, why };
    return { ok: true, answeredCallIds: answered.map(text) };
  }

  async claim(codeModeRunId: string, scope: StoreScope, leaseMs: number, token: string = randomUUID(), holder?: string): Promise<ClaimResult> {
    const reply = buffers(
      await scripts.claim.run(this.redis, [
        this.prefix,
        Date.now(),
        codeModeRunId,
        sessionKeyOf(scope),
        scope.agentRunId,
        Math.ceil(leaseMs),
        token,
        holder ?? "",
      ]),
    );
    const [status, exp, generation, meta, pending, snapshot, ...answers] = reply;
    const why = text(status);
    if (why === "unavailable") {
      const gone = await this.redis.get(`${this.prefix}vanished:${codeModeRunId}`);
      return { ok: false, why: gone !== null && gone === vanishedValue(scope) ? "vanished" : "unavailable" };
    }
    if (why === "session" || why === "run" || why === "busy" || why === "lost") return { ok: false, why };
    const entries = JSON.parse(text(pending)) as PendingEntry[];
    const run: SuspendedRecord = {
      ...(JSON.parse(text(meta)) as Meta),
      codeModeRunId,
      snapshot: new Uint8Array(bytes(snapshot)),
      pending: entries,
      answers: inPendingOrder(entries, answers),
      expiresAtMs: Number(text(exp)),
      generation: Number(text(generation)),
    };
    return { ok: true, run, token };
  }

  async release(codeModeRunId: string, token: string, keep: boolean): Promise<boolean> {
    return (await scripts.release.run(this.redis, [this.prefix, Date.now(), codeModeRunId, token, keep ? "1" : "0"])) === 1;
  }

  async invalidate(codeModeRunId: string, token: string, generation: number): Promise<boolean> {
    return (await scripts.invalidate.run(this.redis, [this.prefix, Date.now(), codeModeRunId, token, generation])) === 1;
  }

  async markVanished(runs: ReadonlyArray<{ codeModeRunId: string; scope: StoreScope }>, ttlMs: number): Promise<void> {
    if (runs.length === 0) return;
    // A run with a stored snapshot (a checkpoint) is resumable, not lost.
    const stored = await Promise.all(runs.map((r) => this.redis.exists(`${this.prefix}run:${r.codeModeRunId}`)));
    const batch = this.redis.multi();
    for (const r of runs.filter((_, i) => stored[i] === 0))
      batch.set(`${this.prefix}vanished:${r.codeModeRunId}`, vanishedValue(r.scope), "PX", Math.ceil(ttlMs));
    await batch.exec();
  }

  async releaseHolder(holder: string): Promise<number> {
    return Number(await scripts.releaseHolder.run(this.redis, [this.prefix, Date.now(), holder]));
  }

  async addAnswer(scope: StoreScope, answer: StoredAnswer): Promise<{ result: AnswerResult; codeModeRunId?: string }> {
    if (this.listeners.size > 0) await this.subscribe();
    // A mark's JSON is built by the script (its expiry is clamped there); a decision's is ours.
    const args = isStoredMark(answer)
      ? ["mark", answer.approval.reason, Math.ceil(answer.approval.expiresAtMs), Math.floor(answer.approval.requestedAtMs)]
      : ["answer", JSON.stringify({ ...answer, answeredAtMs: Date.now() })];
    const [result, codeModeRunId] = buffers(await scripts.addAnswer.run(this.redis, [this.prefix, Date.now(), answer.callId, scopeKeyOf(scope), ...args])).map(
      text,
    );
    if (!ANSWER_RESULTS.has(result as AnswerResult)) throw new Error(`unexpected addAnswer reply ${result}`);
    return codeModeRunId === undefined ? { result: result as AnswerResult } : { result: result as AnswerResult, codeModeRunId };
  }

  async answers(codeModeRunId: string, token: string, seen: ReadonlySet<string>): Promise<StoredAnswer[] | undefined> {
    const reply = await scripts.answers.run(this.redis, [this.prefix, Date.now(), codeModeRunId, token]);
    if (reply === null) return undefined;
    const [pending, ...answers] = buffers(reply);
    return inPendingOrder(JSON.parse(text(pending)) as PendingEntry[], answers).filter((a) => !seen.has(seenKey(a)));
  }

  onAnswer(listener: (codeModeRunId: string) => void): () => void {
    this.listeners.add(listener);
    void this.subscribe();
    return () => this.listeners.delete(listener);
  }

  async deleteScope(scope: StoreScope): Promise<number> {
    return Number(await scripts.deleteScope.run(this.redis, [this.prefix, Date.now(), scopeKeyOf(scope)]));
  }

  async count(): Promise<number> {
    return this.redis.zcount(`${this.prefix}runs`, `(${Date.now()}`, "+inf");
  }

  async bytes(): Promise<number> {
    return (await this.held())[0];
  }

  async nextExpiry(): Promise<number | undefined> {
    const next = (await this.held())[1];
    return next < 0 ? undefined : next;
  }

  /** What the unexpired runs hold, and when the next one expires (-1: none). */
  private async held(): Promise<[number, number]> {
    const reply = await scripts.held.run(this.redis, [this.prefix, Date.now()]);
    if (!Array.isArray(reply)) throw new Error("unexpected reply from Redis");
    return [Number(reply[0]), Number(reply[1])];
  }

  async close(): Promise<void> {
    this.listeners.clear();
    await Promise.all([this.ownsConnection && quitRedis(this.redis), this.subscriber && quitRedis(this.subscriber)]);
  }

  /** Subscribes the answer channel once; a failed attempt is logged and retried on the next call. */
  private subscribe(): Promise<void> {
    this.subscribing ??= (async () => {
      this.subscriber ??= watchRedis(this.redis.duplicate(), this.log).on("message", (_channel: string, id: string) => this.emit(id));
      await this.subscriber.subscribe(`${this.prefix}answers`);
    })().catch((err: unknown) => {
      this.subscribing = undefined;
      this.log?.warn({ err }, "could not subscribe to stored answers");
    });
    return this.subscribing;
  }

  private emit(codeModeRunId: string): void {
    for (const listener of [...this.listeners]) {
      try {
        listener(codeModeRunId);
      } catch (err) {
        this.log?.error({ err, codeModeRunId }, "an onAnswer listener threw");
      }
    }
  }
}

const ANSWER_RESULTS: ReadonlySet<AnswerResult> = new Set(["stored", "unknown", "scope", "duplicate", "ended", "asking", "expired"]);

function sessionKeyOf(s: StoreScope): string {
  return JSON.stringify([s.agentId, s.sessionId, s.sessionKey]);
}

/** Stored answers in the order the VM awaits their calls (the same order in every store). */
function inPendingOrder(pending: PendingEntry[], answers: Buffer[]): StoredAnswer[] {
  const byCall = new Map(answers.map((b) => JSON.parse(text(b)) as StoredAnswer).map((a) => [a.callId, a]));
  return pending.flatMap((p) => {
    const answer = byCall.get(p.callId);
    return answer ? [answer] : [];
  });
}

function buffers(reply: unknown): Buffer[] {
  if (!Array.isArray(reply)) throw new Error("unexpected reply from Redis");
  return reply.map(bytes);
}

function bytes(reply: unknown): Buffer {
  if (!Buffer.isBuffer(reply)) throw new Error("unexpected reply from Redis");
  return reply;
}

function text(reply: unknown): string {
  return bytes(reply).toString("utf8");
}

/** What a vanished run's key holds: the scope a claim must come from to be told it was lost. */
function vanishedValue(scope: StoreScope): string {
  return `${sessionKeyOf(scope)}\n${scope.agentRunId}`;
}

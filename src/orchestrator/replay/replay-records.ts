/**
 * Where the orchestrator keeps code-mode runs' replay records (docs/replay.md): per run
 * scope and code-mode run id, the segments' records (JSON, ../../sandbox/exec/replay-record.ts)
 * in the order they arrived. A record outlives its agent run, so yesterday's runs can be
 * replayed against a new build: it is dropped REPLAY_TTL_MS after its last segment, and a
 * run keeps its first MAX_REPLAY_SEGMENTS segments. Once a segment's VM received a secret
 * answer (its tape is `tainted`), the run's later segments are not kept: their VMs may hold
 * what the secret said, and a replay stops at the secret anyway. Each tenant's records are
 * bounded in bytes on their own (`maxReplayBytes`): past it the tenant's oldest runs' records
 * go first, never another tenant's. In memory (below) or in Redis (./redis-replay-records.ts).
 */
import type { Logger } from "../../shared/logger.js";
import { scopeKeyOf, tenantOfScope, type Scope } from "../../shared/scope.js";
import type { Tenants } from "../../shared/tenants.js";

export const REPLAY_TTL_MS = 7 * 24 * 3_600_000;
export const MAX_REPLAY_SEGMENTS = 256;
/** A tenant's `maxReplayBytes` when its quotas name none. */
export const DEFAULT_MAX_REPLAY_BYTES = 256 * 1024 * 1024;
/** The memory store's bound on all records it keeps: each tenant gets at most an equal share. */
export const MEMORY_MAX_BYTES = 256 * 1024 * 1024;
/** Below this part of its bound, a tenant that had records dropped is back within it (the log says so once). */
const BACK_UNDER = 0.9;

export interface ReplayRecords {
  append(scope: Scope, codeModeRunId: string, segmentJson: string): Promise<void>;
  /** The run's segments' records in order; empty when none is kept. */
  segments(scope: Scope, codeModeRunId: string): Promise<string[]>;
}

/** Whether a segment record's tape says a secret reached its VM (the recorder writes this key; a guest's text is escaped in the JSON). */
export function isTainted(segmentJson: string): boolean {
  return segmentJson.includes('"tainted":true');
}

export function replayKey(scope: Scope, codeModeRunId: string): string {
  return `${scopeKeyOf(scope)}\u0000${codeModeRunId}`;
}

/**
 * The bytes of segment records a tenant may keep: its `maxReplayBytes`, DEFAULT_MAX_REPLAY_BYTES
 * when it names none; in memory at most an equal share of MEMORY_MAX_BYTES, so the process's
 * bound holds whatever the quotas say.
 */
export function replayBytesOf(tenants: Tenants, tenant: string, store: "memory" | "redis"): number {
  const quota = tenants.quotas(tenant).maxReplayBytes ?? DEFAULT_MAX_REPLAY_BYTES;
  return store === "memory" ? Math.min(quota, Math.floor(MEMORY_MAX_BYTES / tenants.names.length)) : quota;
}

/**
 * Says once per episode that a tenant's records reached its bound and some were dropped,
 * and once that it is back within it (below BACK_UNDER of it). Per orchestrator: with
 * replicas on one Redis, each logs the episodes it sees.
 */
export class ReplayBoundLog {
  /** Tenants in an episode, and how many runs' records were dropped in it. */
  private readonly episodes = new Map<string, number>();

  constructor(private readonly log: Logger) {}

  /** After an append: `dropped` runs' records were dropped to keep `tenant` within `bound`; `total` is what it holds now. */
  note(tenant: string, dropped: number, total: number, bound: number, codeModeRunId: string): void {
    const seen = this.episodes.get(tenant);
    if (dropped > 0) {
      if (seen === undefined)
        this.log.warn(
          { tenant, maxReplayBytes: bound, codeModeRunId },
          "replay records reached the tenant's bound (maxReplayBytes): its oldest runs' records are dropped, and a run larger than the bound is not kept",
        );
      this.episodes.set(tenant, (seen ?? 0) + dropped);
    } else if (seen !== undefined && total <= bound * BACK_UNDER) {
      this.log.info({ tenant, maxReplayBytes: bound, dropped: seen }, "replay records are back within the tenant's bound");
      this.episodes.delete(tenant);
    }
  }
}

type Held = { segments: string[]; bytes: number; expiresAtMs: number; tainted: boolean };
/** One tenant's records, in the order of their last segment (so of their expiry), and their bytes. */
type TenantRecords = { runs: Map<string, Held>; bytes: number };

/**
 * Records in this process's memory, each tenant's apart and bounded on its own (replayBytesOf):
 * an append that takes a tenant past its bound drops that tenant's runs with the oldest last
 * segment first; a run larger than the bound alone is dropped itself. Its later segments, if
 * any, start a record without its exec, which ./replay-handlers.ts reports as not kept.
 */
export class MemoryReplayRecords implements ReplayRecords {
  private readonly tenants = new Map<string, TenantRecords>();
  private readonly bytesOf: (tenant: string) => number;
  private readonly bounds: ReplayBoundLog | undefined;
  private readonly ttlMs: number;

  /** `ttlMs`: how long a record is kept after its last segment (REPLAY_TTL_MS; tests shorten it). */
  constructor(options: { bytesOf?: (tenant: string) => number; log?: Logger; ttlMs?: number } = {}) {
    this.bytesOf = options.bytesOf ?? (() => MEMORY_MAX_BYTES);
    this.bounds = options.log ? new ReplayBoundLog(options.log) : undefined;
    this.ttlMs = options.ttlMs ?? REPLAY_TTL_MS;
  }

  async append(scope: Scope, codeModeRunId: string, segmentJson: string): Promise<void> {
    const tenant = tenantOfScope(scope);
    const bound = this.bytesOf(tenant);
    // maxReplayBytes 0: the tenant keeps no record.
    if (bound <= 0) return;
    let t = this.tenants.get(tenant);
    if (!t) this.tenants.set(tenant, (t = { runs: new Map(), bytes: 0 }));
    const now = Date.now();
    // The first runs are the first to expire.
    for (const [key, h] of t.runs) {
      if (h.expiresAtMs > now) break;
      t.runs.delete(key);
      t.bytes -= h.bytes;
    }
    const key = replayKey(scope, codeModeRunId);
    const held = t.runs.get(key);
    if (held?.tainted) return;
    const kept = !held || held.segments.length < MAX_REPLAY_SEGMENTS;
    const bytes = (held?.bytes ?? 0) + (kept ? Buffer.byteLength(segmentJson) : 0);
    t.runs.delete(key);
    t.bytes -= held?.bytes ?? 0;
    if (bytes > bound) {
      this.bounds?.note(tenant, 1, t.bytes, bound, codeModeRunId);
      return;
    }
    const segments = held?.segments ?? [];
    if (kept) segments.push(segmentJson);
    t.runs.set(key, { segments, bytes, expiresAtMs: now + this.ttlMs, tainted: isTainted(segmentJson) });
    t.bytes += bytes;
    let dropped = 0;
    for (const [other, h] of t.runs) {
      if (t.bytes <= bound || other === key) break;
      t.runs.delete(other);
      t.bytes -= h.bytes;
      dropped++;
    }
    this.bounds?.note(tenant, dropped, t.bytes, bound, codeModeRunId);
  }

  async segments(scope: Scope, codeModeRunId: string): Promise<string[]> {
    const held = this.tenants.get(tenantOfScope(scope))?.runs.get(replayKey(scope, codeModeRunId));
    return held && held.expiresAtMs > Date.now() ? [...held.segments] : [];
  }

  /** The bytes `tenant`'s records hold (tests). */
  bytesHeld(tenant: string): number {
    return this.tenants.get(tenant)?.bytes ?? 0;
  }
}

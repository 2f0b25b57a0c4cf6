/**
 * Where the orchestrator keeps code-mode runs' replay records (docs/replay.md): per run
 * scope and code-mode run id, the segments' records (JSON, ../../sandbox/exec/replay-record.ts)
 * in the order they arrived. A record outlives its agent run, so yesterday's runs can be
 * replayed against a new build: it is dropped REPLAY_TTL_MS after its last segment, and a
 * run keeps its first MAX_REPLAY_SEGMENTS segments. Once a segment's VM received a secret
 * answer (its tape is `tainted`), the run's later segments are not kept: their VMs may hold
 * what the secret said, and a replay stops at the secret anyway. In memory (below, bounded in
 * bytes, least recently used dropped first) or in Redis (./redis-replay-records.ts).
 */
import { LRUCache } from "lru-cache";
import { scopeKeyOf, type Scope } from "../../shared/scope.js";

export const REPLAY_TTL_MS = 7 * 24 * 3_600_000;
export const MAX_REPLAY_SEGMENTS = 256;
/** The memory store's bound on all records it keeps. */
const MEMORY_MAX_BYTES = 256 * 1024 * 1024;

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

export class MemoryReplayRecords implements ReplayRecords {
  private readonly runs = new LRUCache<string, string[]>({
    maxSize: MEMORY_MAX_BYTES,
    sizeCalculation: (segments) =>
      Math.max(
        1,
        segments.reduce((n, s) => n + s.length, 0),
      ),
    ttl: REPLAY_TTL_MS,
  });

  async append(scope: Scope, codeModeRunId: string, segmentJson: string): Promise<void> {
    const key = replayKey(scope, codeModeRunId);
    const held = this.runs.get(key) ?? [];
    if (held.length >= MAX_REPLAY_SEGMENTS) return;
    this.runs.set(key, [...held, segmentJson]);
  }

  async segments(scope: Scope, codeModeRunId: string): Promise<string[]> {
    return [...(this.runs.get(replayKey(scope, codeModeRunId)) ?? [])];
  }
}

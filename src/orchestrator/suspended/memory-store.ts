/**
 * The in-memory RunStore: the embedded default, for one orchestrator process. Runs live
 * in Maps; expiry is checked on every access, and a background sweep drops what nobody
 * touches again. Semantics match RedisRunStore exactly (one contract test suite).
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "../../shared/logger.js";
import { APPROVAL_KEEP_MS, clampApproval } from "../../shared/link-wire.js";
import { LIMITS } from "../../shared/limits.js";
import {
  GENERATION_MEMORY_MS,
  SETTLED_CALL_MEMORY_MS,
  sameSession,
  scopeKeyOf,
  type AnswerResult,
  type ClaimResult,
  type Hold,
  type RunStore,
  type StoreScope,
  type StoredAnswer,
  type SuspendedRecord,
  type SuspendResult,
  isStoredMark,
  recordBytes,
  seenKey,
} from "./run-store.js";

/**
 * answered: an answer was stored (or delivered); ended: dropped from pending without one;
 * approval: a person is being asked, until `untilMs` (then a decision is refused as expired).
 */
type CallState = "pending" | "answered" | "ended" | { approval: true; untilMs: number };

type Run = {
  /** The record as stored; its `answers` live in `answers`, its snapshot is the store's copy. */
  record: SuspendedRecord;
  answers: Map<string, StoredAnswer>;
  /** Every call this run has awaited since it was first suspended. */
  calls: Map<string, CallState>;
  claim: { token: string; leaseEndMs: number; holder?: string } | undefined;
  /** What it holds (`recordBytes`, as stored). */
  bytes: number;
  /** Its snapshot was invalidated: never resumed. */
  lost?: true;
};

type SettledCall = { codeModeRunId: string; scopeKey: string; answered: boolean; forgetAtMs: number; approvalUntilMs?: number };

/** Settled call ids remembered at most; the oldest are forgotten first. */
const MAX_SETTLED_CALLS = 100_000;
const SWEEP_INTERVAL_MS = 1_000;

export class MemoryRunStore implements RunStore {
  readonly kind = "memory";
  private readonly runs = new Map<string, Run>();
  /** Call id → the stored run that awaits (or awaited) it. */
  private readonly callRuns = new Map<string, string>();
  /** Call ids of settled runs, oldest first. */
  private readonly settled = new Map<string, SettledCall>();
  /** Run id → its generation, kept past the run until `forgetAtMs` (GENERATION_MEMORY_MS after its last expiry). */
  private readonly generations = new Map<string, { generation: number; forgetAtMs: number }>();
  private readonly listeners = new Set<(codeModeRunId: string) => void>();
  /** Runs a gone sidecar ran that were never stored (`markVanished`), oldest first. */
  private readonly vanished = new Map<string, { scope: StoreScope; forgetAtMs: number }>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(private readonly log?: Logger) {
    this.sweeper = setInterval(() => this.sweep(), SWEEP_INTERVAL_MS).unref();
  }

  async suspend(
    record: SuspendedRecord,
    options: { maxSuspendedRuns: number; maxSuspendedBytes?: number; claimToken?: string; hold?: Hold },
  ): Promise<SuspendResult> {
    const now = Date.now();
    const id = record.codeModeRunId;
    const existing = this.live(id, now);
    // This very request again (its reply was lost with an orchestrator): already stored as sent.
    if (existing && existing.record.generation === record.generation && Buffer.compare(existing.record.snapshot, record.snapshot) === 0) {
      return { ok: true, answeredCallIds: answeredIds(existing.answers) };
    }
    if (options.claimToken === undefined) {
      if (existing) return { ok: false, why: "claim_lost" };
      if (this.countLive(now) >= options.maxSuspendedRuns) return { ok: false, why: "cap" };
    } else if (!existing || !isCurrent(existing, options.claimToken, now)) {
      return { ok: false, why: "claim_lost" };
    }
    const known = this.generations.get(id);
    const current = known && known.forgetAtMs > now ? known.generation : 0;
    // A new run starts at 1, on a run id whose generation is not remembered (it never starts over).
    if (record.generation !== current + 1 || (options.claimToken === undefined && current !== 0)) return { ok: false, why: "stale" };
    const bytes = recordBytes(record);
    if (options.maxSuspendedBytes !== undefined && this.bytesLive(now, id) + bytes > options.maxSuspendedBytes) return { ok: false, why: "bytes" };
    const pending = new Set(record.pending.map((p) => p.callId));
    const answers = new Map<string, StoredAnswer>();
    const calls = new Map<string, CallState>();
    if (existing) {
      for (const [callId, answer] of existing.answers) if (pending.has(callId)) answers.set(callId, answer);
      for (const [callId, state] of existing.calls)
        calls.set(callId, typeof state !== "string" || state === "pending" ? (pending.has(callId) ? state : "ended") : state);
    }
    // One answer per call; a decision replaces a mark that a person is being asked.
    for (const answer of record.answers) {
      if (!pending.has(answer.callId)) continue;
      const held = answers.get(answer.callId);
      if (!held || (isStoredMark(held) && !isStoredMark(answer))) answers.set(answer.callId, answer);
    }
    for (const callId of pending) {
      if (calls.get(callId) !== "answered") calls.set(callId, "pending");
      this.callRuns.set(callId, id);
    }
    for (const [callId, a] of answers) calls.set(callId, isStoredMark(a) ? { approval: true, untilMs: a.approval.expiresAtMs } : "answered");
    const stored = copyRecord(record);
    const hold = options.hold;
    const claim = hold ? { token: hold.token, leaseEndMs: now + hold.leaseMs, ...(hold.holder ? { holder: hold.holder } : {}) } : undefined;
    if (claim) stored.expiresAtMs = Math.max(stored.expiresAtMs, claim.leaseEndMs);
    this.runs.set(id, { record: stored, answers, calls, claim, bytes });
    this.rememberGeneration(id, record.generation, stored.expiresAtMs);
    return { ok: true, answeredCallIds: answeredIds(answers) };
  }

  async claim(codeModeRunId: string, scope: StoreScope, leaseMs: number, token: string = randomUUID(), holder?: string): Promise<ClaimResult> {
    const now = Date.now();
    const run = this.live(codeModeRunId, now);
    if (!run) {
      const gone = this.vanished.get(codeModeRunId);
      const mine = gone && gone.forgetAtMs > now && sameSession(gone.scope, scope) && gone.scope.agentRunId === scope.agentRunId;
      return { ok: false, why: mine ? "vanished" : "unavailable" };
    }
    if (!sameSession(run.record.scope, scope)) return { ok: false, why: "session" };
    if (run.record.scope.agentRunId !== scope.agentRunId) return { ok: false, why: "run" };
    if (run.claim && run.claim.leaseEndMs > now && run.claim.token !== token) return { ok: false, why: "busy" };
    if (run.lost) return { ok: false, why: "lost" };
    const claim = { token, leaseEndMs: now + leaseMs, ...(holder ? { holder } : {}) };
    run.claim = claim;
    run.record.expiresAtMs = Math.max(run.record.expiresAtMs, claim.leaseEndMs);
    this.rememberGeneration(codeModeRunId, run.record.generation, run.record.expiresAtMs);
    return { ok: true, token: claim.token, run: { ...copyRecord(run.record), answers: inPendingOrder(run) } };
  }

  async release(codeModeRunId: string, token: string, keep: boolean): Promise<boolean> {
    const now = Date.now();
    const run = this.live(codeModeRunId, now);
    if (!run || !isCurrent(run, token, now)) return false;
    if (keep) run.claim = undefined;
    else this.drop(codeModeRunId, run, now);
    return true;
  }

  async invalidate(codeModeRunId: string, token: string, generation: number): Promise<boolean> {
    const now = Date.now();
    const run = this.live(codeModeRunId, now);
    if (!run || !isCurrent(run, token, now)) return false;
    // The same request again (its reply was lost): already done.
    if (run.lost) return run.record.generation === generation + 1;
    if (run.record.generation !== generation) return false;
    run.lost = true;
    run.bytes -= run.record.snapshot.byteLength;
    run.record.snapshot = new Uint8Array(0);
    run.record.generation = generation + 1;
    this.rememberGeneration(codeModeRunId, run.record.generation, run.record.expiresAtMs);
    return true;
  }

  async markVanished(runs: ReadonlyArray<{ codeModeRunId: string; scope: StoreScope }>, ttlMs: number): Promise<void> {
    const now = Date.now();
    const forgetAtMs = now + ttlMs;
    for (const r of runs) {
      if (this.live(r.codeModeRunId, now)) continue;
      this.vanished.delete(r.codeModeRunId);
      this.vanished.set(r.codeModeRunId, { scope: { ...r.scope }, forgetAtMs });
    }
    while (this.vanished.size > MAX_SETTLED_CALLS) this.vanished.delete(this.vanished.keys().next().value!);
  }

  async releaseHolder(holder: string): Promise<number> {
    const now = Date.now();
    let released = 0;
    for (const id of [...this.runs.keys()]) {
      const run = this.live(id, now);
      if (run?.claim?.holder !== holder || run.claim.leaseEndMs <= now) continue;
      run.claim = undefined;
      released++;
    }
    return released;
  }

  async addAnswer(scope: StoreScope, answer: StoredAnswer): Promise<{ result: AnswerResult; codeModeRunId?: string }> {
    const now = Date.now();
    const scopeKey = scopeKeyOf(scope);
    const codeModeRunId = this.callRuns.get(answer.callId);
    const run = codeModeRunId === undefined ? undefined : this.live(codeModeRunId, now);
    if (codeModeRunId !== undefined && run) {
      if (scopeKeyOf(run.record.scope) !== scopeKey) return { result: "scope" };
      const state = run.calls.get(answer.callId);
      if (state === "answered") return { result: "duplicate", codeModeRunId };
      if (state === "ended") return { result: "ended", codeModeRunId };
      if (typeof state === "object") {
        if (isStoredMark(answer)) return { result: "asking", codeModeRunId };
        if (state.untilMs <= now) return { result: "expired", codeModeRunId };
      }
      if (isStoredMark(answer)) {
        const kept = { ...answer, approval: clampApproval(answer.approval, run.record.approvalTimeoutMs ?? LIMITS.approvalTimeoutMs.default) };
        run.answers.set(answer.callId, kept);
        run.calls.set(answer.callId, { approval: true, untilMs: kept.approval.expiresAtMs });
        // Kept past the expiry, so a wait then can tell the program ApprovalExpired.
        run.record.expiresAtMs = Math.max(run.record.expiresAtMs, kept.approval.expiresAtMs + APPROVAL_KEEP_MS);
        this.rememberGeneration(codeModeRunId, run.record.generation, run.record.expiresAtMs);
      } else {
        const asked = typeof state === "object" ? run.answers.get(answer.callId) : undefined;
        const approval = asked && isStoredMark(asked) ? { approvalRequestedAtMs: asked.approval.requestedAtMs, approvalReason: asked.approval.reason } : {};
        run.answers.set(answer.callId, { ...answer, answeredAtMs: now, ...approval });
        run.calls.set(answer.callId, "answered");
      }
      this.emit(codeModeRunId);
      return { result: "stored", codeModeRunId };
    }
    const settled = this.settled.get(answer.callId);
    if (!settled || settled.forgetAtMs <= now) return { result: "unknown" };
    if (settled.scopeKey !== scopeKey) return { result: "scope" };
    if (settled.approvalUntilMs !== undefined && settled.approvalUntilMs <= now && !isStoredMark(answer))
      return { result: "expired", codeModeRunId: settled.codeModeRunId };
    return { result: settled.answered ? "duplicate" : "ended", codeModeRunId: settled.codeModeRunId };
  }

  async answers(codeModeRunId: string, token: string, seen: ReadonlySet<string>): Promise<StoredAnswer[] | undefined> {
    const now = Date.now();
    const run = this.live(codeModeRunId, now);
    if (!run || !isCurrent(run, token, now)) return undefined;
    return inPendingOrder(run).filter((a) => !seen.has(seenKey(a)));
  }

  onAnswer(listener: (codeModeRunId: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async deleteScope(scope: StoreScope): Promise<number> {
    const now = Date.now();
    const scopeKey = scopeKeyOf(scope);
    let deleted = 0;
    for (const id of this.runs.keys()) {
      const run = this.live(id, now);
      if (run && scopeKeyOf(run.record.scope) === scopeKey) {
        this.drop(id, run, now);
        deleted++;
      }
    }
    return deleted;
  }

  async count(): Promise<number> {
    return this.countLive(Date.now());
  }

  async bytes(): Promise<number> {
    return this.bytesLive(Date.now());
  }

  async nextExpiry(): Promise<number | undefined> {
    const now = Date.now();
    let next: number | undefined;
    for (const id of [...this.runs.keys()]) {
      const run = this.live(id, now);
      if (run && (next === undefined || run.record.expiresAtMs < next)) next = run.record.expiresAtMs;
    }
    return next;
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    this.listeners.clear();
  }

  /** The run, unless absent or expired (an expired run is dropped here, settled at its expiry). */
  private live(id: string, now: number): Run | undefined {
    const run = this.runs.get(id);
    if (run && run.record.expiresAtMs <= now) {
      this.drop(id, run, run.record.expiresAtMs);
      return undefined;
    }
    return run;
  }

  /** Keeps a run's generation until GENERATION_MEMORY_MS after its expiry (never less long than before). */
  private rememberGeneration(id: string, generation: number, expiresAtMs: number): void {
    const forgetAtMs = Math.max(expiresAtMs + GENERATION_MEMORY_MS, this.generations.get(id)?.forgetAtMs ?? 0);
    this.generations.set(id, { generation, forgetAtMs });
  }

  /** What the unexpired runs hold, `except` one run id. */
  private bytesLive(now: number, except?: string): number {
    let n = 0;
    for (const id of [...this.runs.keys()]) {
      const run = id === except ? undefined : this.live(id, now);
      if (run) n += run.bytes;
    }
    return n;
  }

  private countLive(now: number): number {
    let n = 0;
    for (const id of this.runs.keys()) if (this.live(id, now)) n++;
    return n;
  }

  /** Deletes a run; its call ids are remembered for SETTLED_CALL_MEMORY_MS after `settledAtMs`. */
  private drop(id: string, run: Run, settledAtMs: number): void {
    this.runs.delete(id);
    const scopeKey = scopeKeyOf(run.record.scope);
    for (const [callId, state] of run.calls) {
      if (this.callRuns.get(callId) !== id) continue;
      this.callRuns.delete(callId);
      this.settled.delete(callId);
      this.settled.set(callId, {
        codeModeRunId: id,
        scopeKey,
        answered: state === "answered",
        forgetAtMs: settledAtMs + SETTLED_CALL_MEMORY_MS,
        ...(typeof state === "object" ? { approvalUntilMs: state.untilMs } : {}),
      });
    }
    for (const oldest of this.settled.keys()) {
      if (this.settled.size <= MAX_SETTLED_CALLS) break;
      this.settled.delete(oldest);
    }
  }

  private sweep(): void {
    const now = Date.now();
    this.countLive(now);
    for (const [callId, settled] of this.settled) if (settled.forgetAtMs <= now) this.settled.delete(callId);
    for (const [id, known] of this.generations) if (known.forgetAtMs <= now) this.generations.delete(id);
    for (const [id, gone] of this.vanished) if (gone.forgetAtMs <= now) this.vanished.delete(id);
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

/** Calls with a decision stored (a mark that a person is being asked is none). */
function answeredIds(answers: ReadonlyMap<string, StoredAnswer>): string[] {
  return [...answers].flatMap(([id, a]) => (isStoredMark(a) ? [] : [id]));
}

function isCurrent(run: Run, token: string, now: number): boolean {
  return run.claim !== undefined && run.claim.token === token && run.claim.leaseEndMs > now;
}

/** A copy the caller cannot alias: the store's bytes and lists stay its own. */
function copyRecord(record: SuspendedRecord): SuspendedRecord {
  return {
    ...record,
    scope: { ...record.scope },
    snapshot: new Uint8Array(record.snapshot),
    pending: record.pending.map((p) => ({ ...p })),
    answers: [],
  };
}

/** Stored answers in the order the VM awaits their calls (the same order in every store). */
function inPendingOrder(run: Run): StoredAnswer[] {
  return run.record.pending.flatMap((p) => {
    const answer = run.answers.get(p.callId);
    return answer ? [answer] : [];
  });
}

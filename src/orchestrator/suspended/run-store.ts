/**
 * The suspended-run store: where a `waiting` run lives between `exec` and `wait`, owned by
 * the orchestrator (sidecars reach it through SidecarLink). One interface, two stores with
 * the same semantics, checked by one contract suite: ./memory-store.ts and ./redis-store.ts.
 *
 * It guarantees: a run is readable until `expiresAtMs`, then gone for good; at most
 * `maxSuspendedRuns` unexpired runs; one claim (one `wait`) at a time per run, a lapsed
 * lease void; answers kept with the run, once per call, from any sidecar (a mark that a
 * person is asked may precede one, until its expiry); a settled call id remembered for
 * SETTLED_CALL_MEMORY_MS, so a late or second answer is told apart from an unknown one;
 * a per-run generation that only goes up, remembered GENERATION_MEMORY_MS past the run's
 * last expiry, so a run id cannot start over while a snapshot sealed for it can be opened;
 * and a lost run (its snapshot invalidated: a checkpoint its VM outran) never resumed. The
 * store never opens snapshot bytes (docs/module-notes.md#srcorchestratorsuspendedrun-storets).
 */

import type { PendingKind, SuspendReason } from "../../shared/link-wire.js";
import { sameSession, scopeKeyOf, type Scope } from "../../shared/scope.js";

export type StoreScope = Scope;

/** What a VM was still awaiting when it was snapshotted. */
export type { PendingKind };

export type PendingEntry = {
  callId: string;
  kind: PendingKind;
  /** When an armed timer is due (epoch ms); timers only. */
  dueAtMs?: number;
  /** Catalog id for calls; "" for requests and yields. */
  toolId: string;
  /** Tool name for calls; the operation for requests; "" for yields. */
  toolName: string;
};

/**
 * A gateway's answer kept with its run, or (`approval`) its mark that a person is being
 * asked, which a later decision for the same call replaces. `answeredAtMs`: when the store
 * took it (the orchestrator's clock), for the trajectory.
 */
export type StoredAnswer = (
  | { callId: string; ok: true; json: string }
  | { callId: string; ok: false; error: { name: string; message: string } }
  | { callId: string; approval: { reason: string; expiresAtMs: number; requestedAtMs: number } }
) & { answeredAtMs?: number; approvalRequestedAtMs?: number; approvalReason?: string; secret?: true };

export function isStoredMark(a: StoredAnswer): a is Extract<StoredAnswer, { approval: unknown }> {
  return "approval" in a;
}

/**
 * What `seen` holds for a stored answer: a call's mark and its later decision are told
 * apart, so a sidecar that saw the mark still gets the decision.
 */
export function seenKey(a: StoredAnswer): string {
  return isStoredMark(a) ? `${a.callId}#approval` : a.callId;
}

export type SuspendedRecord = {
  /** The code-mode runId the model passes to `wait`. */
  codeModeRunId: string;
  scope: StoreScope;
  /** Sealed snapshot envelope (opaque to the store). */
  snapshot: Uint8Array;
  /** Everything the VM awaits, answered or not. */
  pending: PendingEntry[];
  /** Answers received for pending calls and not yet delivered into a VM. */
  answers: StoredAnswer[];
  reason: SuspendReason;
  /** The effective config the run started with, as JSON text. */
  configJson: string;
  /** Output bytes produced so far (the budget carries over). */
  outputBytes: number;
  expiresAtMs: number;
  catalogVersion: string;
  execCallId: string;
  /** The run's approvalTimeoutMs: a mark stored for one of its calls expires no later than this after it was asked for. */
  approvalTimeoutMs?: number;
  /**
   * In suspend: the generation the snapshot was sealed for (the stored one plus one). From
   * claim: the store's current generation.
   */
  generation: number;
};

/**
 * stale: `record.generation` is not the stored generation plus one. bytes: the unexpired
 * runs would hold more than `maxSuspendedBytes` (`recordBytes` each).
 */
export type SuspendResult = { ok: true; answeredCallIds: string[] } | { ok: false; why: "cap" | "bytes" | "claim_lost" | "stale" };

/**
 * What a suspended run holds in the store, as a tenant's `maxSuspendedBytes` counts it: its
 * sealed snapshot and what the suspension stored with it (config, pending calls, answers).
 */
export function recordBytes(record: SuspendedRecord): number {
  return (
    record.snapshot.byteLength +
    Buffer.byteLength(record.configJson, "utf8") +
    Buffer.byteLength(JSON.stringify(record.pending), "utf8") +
    Buffer.byteLength(JSON.stringify(record.answers), "utf8")
  );
}

/**
 * lost: the run's snapshot was invalidated (its VM sent a call since) and its VM is gone:
 * it can never be resumed. vanished: no snapshot of the run was ever stored, and the sidecar
 * that ran it is gone (`markVanished`).
 */
export type ClaimResult =
  | { ok: true; run: SuspendedRecord; token: string }
  | { ok: false; why: "unavailable" | "session" | "run" | "busy" | "lost" | "vanished" };

/** How long the runs of a gone sidecar that never reached the store are remembered as lost. */
export const VANISHED_MEMORY_MS = 60 * 60_000;

/**
 * A checkpoint's claim, kept after the write: `token` holds the run for `leaseMs` (as a
 * claim does), by `holder`, the sidecar whose claims `releaseHolder` ends.
 */
export type Hold = { token: string; leaseMs: number; holder?: string };

/**
 * stored: kept with its run; unknown: no suspended run ever awaited this id (as far as
 * the store remembers); scope: the id belongs to another scope; duplicate: an answer
 * for it is already stored or was delivered; ended: its run settled without it; asking:
 * a second approval mark for a call that already awaits approval; expired: a decision for
 * a call whose approval expired.
 */
export type AnswerResult = "stored" | "unknown" | "scope" | "duplicate" | "ended" | "asking" | "expired";

export interface RunStore {
  readonly kind: "memory" | "redis";
  /**
   * Stores a new suspended run (refused with `cap` when `maxSuspendedRuns` unexpired runs
   * exist), or, with `claimToken`, replaces the run that claim holds and ends the claim
   * (`claim_lost` when the claim is not current). Either is refused with `bytes` when, with
   * it, the unexpired runs would hold more than `maxSuspendedBytes` (`recordBytes`). On replacement, answers already stored
   * for calls that are still pending are kept and merged with `record.answers` (one per
   * call id); call ids no longer pending are remembered as answered or ended. Returns the
   * pending call ids that have a stored decision after the merge (not a mark). Refused with `stale` (and
   * nothing changed) unless `record.generation` is the stored generation plus one, and for
   * a new run 1 on a run id whose generation is not remembered; on success it is the
   * run's generation. The same request sent again (a live run at `record.generation`
   * holding byte-identical sealed snapshot bytes, which a fresh seal never repeats) is
   * `ok` and changes nothing, so a suspension whose reply was lost can be retried. With
   * `hold` (a checkpoint of a VM that lives on), the run stays claimed after the write, by
   * `hold.token`, instead of the claim ending.
   */
  suspend(record: SuspendedRecord, options: { maxSuspendedRuns: number; maxSuspendedBytes?: number; claimToken?: string; hold?: Hold }): Promise<SuspendResult>;
  /**
   * Claims a run for one `wait`, checking scope: another agent/session/key is `session`,
   * another agent run id `run`. `token` is the caller's: a retry with the token of the
   * current claim gets that claim again (with a fresh lease) rather than `busy`, so a
   * claim whose reply was lost can be retried. A random token when omitted. A lost run is
   * refused (`lost`) once no claim holds it. `holder`: the claiming sidecar (`releaseHolder`).
   */
  claim(codeModeRunId: string, scope: StoreScope, leaseMs: number, token?: string, holder?: string): Promise<ClaimResult>;
  /**
   * Ends a claim. keep=true: the run stays as it was, claimable again. keep=false: the run
   * settled and is deleted with its snapshot. False when the claim is not current.
   */
  release(codeModeRunId: string, token: string, keep: boolean): Promise<boolean>;
  /**
   * The claimed run's snapshot, stored as `generation`, no longer matches its live VM: the
   * run becomes lost, its snapshot is dropped and its generation moves to `generation` + 1
   * (no copy of the snapshot opens again). Its pending calls, answers and claim stay: the VM
   * goes on, and its next checkpoint or suspension replaces the run (at `generation` + 2).
   * True when done, or already done (the same request again); false when the claim is not
   * current or the run is at another generation.
   */
  invalidate(codeModeRunId: string, token: string, generation: number): Promise<boolean>;
  /**
   * Remembers, for `ttlMs`, runs whose sidecar is gone before any snapshot of them was stored:
   * a claim of one in its own scope that finds no stored run is refused `vanished` (in another
   * scope, `unavailable`, as for any unknown id). A run stored under the id (a checkpoint) is
   * not marked, and one stored later is unaffected.
   */
  markVanished(runs: ReadonlyArray<{ codeModeRunId: string; scope: StoreScope }>, ttlMs: number): Promise<void>;
  /** Ends every current claim `holder` holds (its sidecar is gone); the runs stay as stored. Returns how many. */
  releaseHolder(holder: string): Promise<number>;
  /**
   * Keeps a gateway's answer (or approval mark) with the suspended (or claimed) run
   * awaiting that call. A mark's expiry is clamped to the run's approvalTimeoutMs (0: that
   * long from when it was asked for), and the run is kept at least as long.
   */
  addAnswer(scope: StoreScope, answer: StoredAnswer): Promise<{ result: AnswerResult; codeModeRunId?: string }>;
  /** Stored answers (and marks) of a claimed run whose `seenKey` is not in `seen`; undefined when the claim is not current. */
  answers(codeModeRunId: string, token: string, seen: ReadonlySet<string>): Promise<StoredAnswer[] | undefined>;
  /** Called whenever an answer is stored for a run (by any orchestrator sharing the store). */
  onAnswer(listener: (codeModeRunId: string) => void): () => void;
  /** Deletes every suspended run of a scope (the gateway closed the run). Returns how many. */
  deleteScope(scope: StoreScope): Promise<number>;
  /** Unexpired suspended runs. */
  count(): Promise<number>;
  /** What the unexpired suspended runs hold (`recordBytes` each). */
  bytes(): Promise<number>;
  /** When the next unexpired suspended run expires (epoch ms); undefined when there is none. */
  nextExpiry(): Promise<number | undefined>;
  close(): Promise<void>;
}

/** How long a settled call id is remembered, to explain late or second answers. */
export const SETTLED_CALL_MEMORY_MS = 10 * 60_000;

/**
 * How long past a run's expiry its generation is remembered: longer than any snapshot
 * sealed for it stays openable (its not-after is at most that expiry, on the sealing
 * sidecar's clock, plus a minute of clock slack), with room for clocks that disagree by
 * up to about nine minutes.
 */
export const GENERATION_MEMORY_MS = 10 * 60_000;

export { sameSession, scopeKeyOf };

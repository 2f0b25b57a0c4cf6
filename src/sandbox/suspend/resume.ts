/**
 * `wait`: continues a suspended run on whichever sidecar the gateway called.
 *
 * It claims the run at the orchestrator (scope-checked; one wait at a time), waits up
 * to `timeoutMs` for the first answer when none is there yet (none: `waiting` again,
 * listing what is still unsettled, and the run stays as it was), checks the snapshot's
 * seal, restores it in a fresh VM on the pool, delivers every answer, and keeps
 * collecting answers from the orchestrator while the VM runs, so calls that settle in
 * time are drained within this same `wait`. The segment ends like an exec: completed,
 * failed (the run is deleted), or suspended again under the same runId. When the
 * sidecar's drain budget runs out, a wait still waiting for its first answer returns
 * `waiting` with the run left intact; one whose VM runs is cancelled. A call that awaits
 * a person's approval is not an answer: the VM is told, and it gets ApprovalExpired once
 * the approval's expiry passes without a decision.
 */
import { randomUUID } from "node:crypto";
import { ServiceError } from "../../protocol/service-error.js";
import { configFromJson, LIMITS, runConfig, type CodeModeConfig } from "../../shared/config.js";
import {
  answerFromWire,
  answerMetaFromWire,
  approvalExpired,
  isApprovalMark,
  pendingKindFromWire,
  reasonFromWire,
  RUN_MESSAGES,
  type AnswerMeta,
  type GatewayAnswer,
} from "../../shared/link-wire.js";
import { approvalRequired, decisionOf, type Approval } from "../exec/approvals.js";
import type { Logger } from "../../shared/logger.js";
import type { OrchestratorLink } from "../link/orchestrator-link.js";
import { withRetries } from "../link/retry.js";
import { killGraceMs } from "../pool/pool-contract.js";
import type { ResultInput } from "../exec/result.js";
import type { ResolvedRun } from "../link/run-resolver.js";
import { unreachable, type Segment, type Answer, type PendingInfo, type SegmentCheckpoints, type SegmentInit } from "../exec/segment.js";
import { SnapshotAuthError, SnapshotKeyUnavailableError, type SnapshotSealer } from "./snapshot-seal.js";
import { endSegment, limitsOf, releaseClaim, sealMeta, unsettledCalls, type SuspendContext } from "./suspension.js";
import { answerMessage, type AnswerMessage, type ResumeTask } from "../pool/task-protocol.js";
import { linkedSignal } from "../exec/drain-signals.js";
import { madeByOtherBuild, rebuildByReplay, type Rebuilt } from "./rebuild.js";
import { envelopeBuild } from "../worker/snapshot-codec.js";

const LINK_DEADLINE_MS = 10_000;
/**
 * How long a claim holds if this sidecar dies mid-wait: longer than any wait can take
 * (waiting for a first answer, queueing for a worker, running, each bounded by the
 * largest timeoutMs plus the kill grace, then storing), after which another wait may
 * resume the run from its stored snapshot. A segment that learns its claim is gone
 * anyway (expired, or the run was closed) is cancelled.
 */
export const CLAIM_LEASE_MS = 3 * (LIMITS.timeoutMs.max + killGraceMs(LIMITS.timeoutMs.max)) + 30_000;
/** Longest single AwaitToolResults long-poll. */
const POLL_MS = 30_000;
/**
 * When every call the run awaited is answered, the long-poll can only learn that the
 * claim was lost (the run was closed meanwhile): it starts this late, so a short segment
 * costs no AwaitToolResults call and no cancelled call on either side.
 */
const LATE_POLL_MS = 25;

const UNAVAILABLE = RUN_MESSAGES.unavailable;

export type WaitDeps = {
  link: OrchestratorLink;
  sealer: SnapshotSealer;
  log: Logger;
  segment(config: CodeModeConfig): Segment;
  init: Omit<SegmentInit, "config">;
  run: ResolvedRun;
  /** Aborted (with the reason as a string) when the sidecar's drain budget runs out. */
  drainSignal: AbortSignal;
  /** Aborted when the sidecar's drain budget ran out: the restored VM suspends again when idle. */
  suspendSignal?: AbortSignal;
  /**
   * An awaitResults exec resuming its own parked run: the first answer is awaited until
   * `untilMs` (not timeoutMs), and the VM runs on what is left of the run's running time
   * (`budget.usedMs` of timeoutMs so far, summed over its segments; parked time is not in it).
   */
  awaiting?: { untilMs: number; budget: RunBudget };
  /** The restored VM's checkpoints (./checkpoints.ts): its claimed snapshot counts as one. */
  checkpoints?: (seg: Segment, ctx: SuspendContext) => SegmentCheckpoints;
  /**
   * A run whose snapshot another build made is first offered to a sidecar of that build
   * (./wait-relay.ts), which serves the wait under this claim: "served" when one did.
   * Unset for a wait that was itself relayed here.
   */
  relay?: (snapshotBuild: Uint8Array, claimToken: string) => Promise<"served" | "unserved">;
  /** The claim token to claim with: a relayed wait takes its origin's claim over. */
  claimToken?: string;
  /**
   * A relayed wait whose origin is gone: the run is kept as a drain keeps it (released as it
   * was before its VM runs; a VM that runs suspends into the store when idle), for a later wait.
   */
  handBack?: AbortSignal;
};

/** The running time an awaitResults exec's segments used so far: the time their VMs held a thread. */
export type RunBudget = { usedMs: number };

/** The least running time a resumed segment is given, so a VM that is nearly out can still take its answers and fail on its own deadline. */
const MIN_SEGMENT_MS = 100;

/**
 * Long-polls the orchestrator for answers not in `seen`, until one arrives, the signal
 * aborts, or `untilMs` passes. Returns false when the claim is no longer current.
 */
export async function collect(
  link: OrchestratorLink,
  codeModeRunId: string,
  token: string,
  seen: Set<string>,
  onAnswer: (id: string, a: GatewayAnswer, times: AnswerMeta) => void,
  signal: AbortSignal,
  untilMs: number,
  once: boolean,
  log: Logger,
): Promise<boolean> {
  while (!signal.aborted) {
    const left = untilMs - Date.now();
    if (left <= 0) return true;
    try {
      const res = await link.client.awaitToolResults(
        { codeModeRunId, claimToken: token, timeoutMs: Math.min(left, POLL_MS), seenCallIds: [...seen] },
        { signal, deadlineMs: Math.min(left, POLL_MS) + LINK_DEADLINE_MS },
      );
      if (!res.claimCurrent) return false;
      let got = false;
      for (const w of res.answers) {
        const a = answerFromWire(w);
        const key = a && isApprovalMark(a) ? `${w.callId}#approval` : w.callId;
        if (!a || seen.has(key)) continue;
        seen.add(key);
        onAnswer(w.callId, a, answerMetaFromWire(w));
        // A mark is no answer: the VM has nothing new to run.
        if (!isApprovalMark(a)) got = true;
      }
      if (got && once) return true;
    } catch (err) {
      if (signal.aborted) return true;
      log.warn({ err, codeModeRunId }, "waiting for tool answers at the orchestrator failed; retrying");
      await new Promise((r) => setTimeout(r, 500).unref());
    }
  }
  return true;
}

export async function serveWait(codeModeRunId: string, deps: WaitDeps, signal: AbortSignal): Promise<void> {
  const { link, sealer, log, run, drainSignal } = deps;
  const early = deps.segment(runConfig(run.configLayer));
  early.recordInput({ runId: codeModeRunId });
  const scope = deps.init.scope;
  // The token is ours, so a claim whose reply was lost can be retried without "busy".
  const token = deps.claimToken || randomUUID();
  let claim;
  try {
    claim = await withRetries(
      () =>
        link.rpc.claimRun({ scope, codeModeRunId, leaseMs: CLAIM_LEASE_MS, claimToken: token, sidecarId: link.sidecarId }, { deadlineMs: LINK_DEADLINE_MS }),
      (err) => err instanceof ServiceError && err.code === "unavailable" && !signal.aborted,
    );
  } catch (err) {
    log.warn({ err }, "could not claim the suspended run");
    return early.finish({ status: "failed", error: unreachable(err), code: "runtime_unavailable" }, 0);
  }
  if (claim.refused || !claim.run) return early.finish({ status: "failed", error: claim.refused || UNAVAILABLE, code: "invalid_input" }, 0);
  const rec = claim.run;
  const release = (keep: boolean) => releaseClaim(link, codeModeRunId, token, keep, log);

  const outputBytesUsed = Number(rec.outputBytes);
  const pending = new Map<string, PendingInfo>();
  for (const p of rec.pending) {
    const kind = pendingKindFromWire(p.kind);
    pending.set(
      p.callId,
      kind === "timer"
        ? { callId: p.callId, kind, toolId: p.toolId, toolName: p.toolName, dueAtMs: Number(p.dueAtMs) }
        : { callId: p.callId, kind, toolId: p.toolId, toolName: p.toolName },
    );
  }

  // The seal is checked first: nothing of a record that fails it is used. The store's
  // generation must be the one the snapshot was sealed for: an older one put back is refused.
  const generation = Number(rec.generation);
  let envelope: Uint8Array;
  try {
    const meta = sealMeta({
      configJson: rec.configJson,
      reason: reasonFromWire(rec.reason),
      pending: pending.values(),
      outputBytes: outputBytesUsed,
    });
    envelope = sealer.open(rec.snapshot, { codeModeRunId, scopeKey: deps.init.scopeKey, meta, generation });
  } catch (err) {
    if (!(err instanceof SnapshotAuthError)) throw err;
    if (err instanceof SnapshotKeyUnavailableError) {
      // Sealed under a key this sidecar does not hold: another sidecar's per-process key, or
      // a key not (or no longer) configured here. The run may well be intact: leave it.
      await release(true);
      if (!sealer.shared) {
        log.warn({ codeModeRunId, keyId: err.keyId }, "cannot resume a run sealed by another sidecar process (no shared CODEMODE_SNAPSHOT_KEYS)");
        return early.finish(
          {
            status: "failed",
            error: "this sidecar cannot resume code mode runs suspended by another sidecar process; configure the same CODEMODE_SNAPSHOT_KEY on every sidecar.",
            code: "runtime_unavailable",
          },
          outputBytesUsed,
        );
      }
      log.warn(
        { codeModeRunId, keyId: err.keyId, keyIds: sealer.keyIds },
        "cannot resume a run sealed under a snapshot key this sidecar does not have; leaving it",
      );
      return early.finish(
        {
          status: "failed",
          error: `this sidecar cannot resume this code mode run: its snapshot was sealed under key id "${err.keyId}", which is not among this sidecar's snapshot keys (CODEMODE_SNAPSHOT_KEYS); the run is kept for a sidecar that has it.`,
          code: "runtime_unavailable",
        },
        outputBytesUsed,
      );
    }
    log.error({ codeModeRunId, generation, reason: err.message }, "refused a suspended run whose snapshot failed authentication; deleting it");
    await release(false);
    return early.finish(
      { status: "failed", error: `code mode run's snapshot failed authentication and was discarded (${err.message}).`, code: "internal_error" },
      outputBytesUsed,
    );
  }

  let config: CodeModeConfig;
  try {
    config = configFromJson(rec.configJson);
  } catch (err) {
    await release(false);
    return early.finish(
      { status: "failed", error: `code mode run has an unreadable config and was discarded: ${(err as Error).message}`, code: "internal_error" },
      0,
    );
  }
  const seg = deps.segment(config);
  seg.recordInput({ runId: codeModeRunId });
  const answers = new Map<string, Answer>();
  /** Calls that await a person's approval, with no decision yet. */
  const marks = new Map<string, Approval>();
  /** When each answer was stored, and when its approval was asked for (trajectory). */
  const times = new Map<string, AnswerMeta>();
  const take = (id: string, a: GatewayAnswer, t: AnswerMeta) => {
    // A call this segment made, answered through the store after a checkpoint listed it.
    if (!pending.has(id)) return void seg.checkpoints?.answerFromStore(id, a, t);
    if (answers.has(id)) return;
    if (isApprovalMark(a)) {
      // approvalMode "error" turns a mark stored while suspended into the guest's ApprovalRequired.
      if (config.approvalMode === "error") answers.set(id, approvalRequired(pending.get(id)!.toolName || pending.get(id)!.toolId, a.approval.reason));
      else marks.set(id, a.approval);
      return;
    }
    marks.delete(id);
    times.set(id, t);
    answers.set(id, a);
  };
  for (const w of rec.answers) {
    const a = answerFromWire(w);
    if (a) take(w.callId, a, answerMetaFromWire(w));
  }
  /** Approvals whose expiry passed without a decision: the guest is told ApprovalExpired. */
  const expireMarks = () => {
    const now = Date.now();
    for (const [id, m] of marks) {
      if (m.expiresAtMs > now) continue;
      marks.delete(id);
      const p = pending.get(id)!;
      answers.set(id, approvalExpired(p.toolName || p.toolId, m));
    }
  };
  expireMarks();
  for (const p of pending.values()) {
    if (answers.has(p.callId)) continue;
    // A yield is over once the model called wait. A catalog request is answered within
    // milliseconds, so one still open was cut by the suspension: the guest retries it.
    if (p.kind === "yield") answers.set(p.callId, { ok: true, json: "" });
    if (p.kind === "request")
      answers.set(p.callId, { ok: false, error: { name: "Error", message: "the catalog request was interrupted by a suspension; make it again." } });
  }
  const seen = new Set(rec.answers.map((a) => (a.outcome.case === "approvalPending" ? `${a.callId}#approval` : a.callId)));
  const onAnswer = take;
  let firstExpiry = Number.POSITIVE_INFINITY;
  for (const m of marks.values()) firstExpiry = Math.min(firstExpiry, m.expiresAtMs);

  // An armed guest timer is work the VM can do without any answer: restore when it is due.
  let timerDue = Number.POSITIVE_INFINITY;
  for (const p of pending.values()) if (p.kind === "timer") timerDue = Math.min(timerDue, p.dueAtMs ?? 0);
  const timerReady = () => timerDue <= Date.now();
  if (answers.size === 0 && !timerReady()) {
    const until = Math.min(deps.awaiting ? deps.awaiting.untilMs : Date.now() + config.timeoutMs, timerDue, firstExpiry);
    // Not AbortSignal.any: the drain's signal is shared and would keep every one (../exec/drain-signals.ts).
    // An awaitResults exec also stops awaiting when the sidecar asks runs to suspend (its drain): the run is handed off as waiting.
    const handOff = [...(deps.awaiting && deps.suspendSignal ? [deps.suspendSignal] : []), ...(deps.handBack ? [deps.handBack] : [])];
    const either = linkedSignal([signal, drainSignal, ...handOff]);
    const current = await collect(link, codeModeRunId, token, seen, onAnswer, either.signal, until, true, log).finally(either.done);
    if (!current) return seg.finish({ status: "failed", error: UNAVAILABLE, code: "invalid_input" }, outputBytesUsed);
    if (signal.aborted) {
      await release(false);
      return;
    }
    expireMarks();
    // Nothing came, or the sidecar stops before the VM was restored: the run stays as it was.
    if ((answers.size === 0 && !timerReady()) || drainSignal.aborted || handOff.some((s) => s.aborted)) {
      await release(true);
      const unsettled = unsettledCalls(pending.values(), (id) => answers.has(id), marks);
      const still: ResultInput = {
        status: "waiting",
        codeModeRunId,
        reason: unsettled.length > 0 && unsettled.every((p) => p.approval) ? "approval" : "pending_tools",
        pending: unsettled,
      };
      return seg.finish(still, outputBytesUsed, rec.snapshot.byteLength);
    }
  }

  const delivered: AnswerMessage[] = [];
  const resolved = (callId: string, a: Answer) => {
    const p = pending.get(callId);
    if (p?.kind !== "call") return;
    seg.recordResolved(callId, a);
    const t = times.get(callId);
    if (t?.approvalRequestedAtMs) {
      seg.approvals.log.asked(callId, p.toolId, { reason: t.approvalReason ?? "", expiresAtMs: 0, requestedAtMs: t.approvalRequestedAtMs });
      seg.approvals.log.decided(callId, decisionOf(a), t.answeredAtMs || Date.now());
    }
  };
  for (const [callId, a] of answers) {
    delivered.push(answerMessage(callId, a));
    resolved(callId, a);
  }
  for (const [callId, m] of marks) {
    const p = pending.get(callId)!;
    seg.awaitApproval(callId, p.toolId, p.toolName, m, false);
  }
  let polling = new AbortController();
  const running = new AbortController();
  const onCancel = () => running.abort(`the gateway cancelled the wait`);
  signal.addEventListener("abort", onCancel, { once: true });
  if (signal.aborted) onCancel();
  const onDrained = () => running.abort(drainSignal.reason);
  drainSignal.addEventListener("abort", onDrained, { once: true });
  if (drainSignal.aborted) onDrained();
  const onLive = (id: string, a: GatewayAnswer, t: AnswerMeta) => {
    take(id, a, t);
    if (isApprovalMark(a)) {
      const p = pending.get(id);
      const m = marks.get(id);
      if (p && m) seg.awaitApproval(id, p.toolId, p.toolName, m, false);
      else if (p && answers.has(id)) seg.answer(id, answers.get(id)!);
      return;
    }
    if (answers.get(id) !== a) return;
    resolved(id, a);
    seg.answer(id, a);
  };
  let poller: Promise<void> = Promise.resolve();
  const poll = () => {
    poller = collect(link, codeModeRunId, token, seen, onLive, polling.signal, Number.POSITIVE_INFINITY, false, log).then((current) => {
      if (!current) running.abort("the run's claim was lost (it expired or the run was closed)");
    });
  };
  let unanswered = false;
  for (const p of pending.values()) if (p.kind === "call" && !answers.has(p.callId)) unanswered = true;
  const late = unanswered ? undefined : setTimeout(poll, LATE_POLL_MS);
  if (unanswered) poll();
  // A relayed wait handed back suspends its VM as a drain does.
  const suspending = deps.handBack ? linkedSignal([deps.suspendSignal, deps.handBack].filter((s) => s !== undefined)) : undefined;
  const suspendSignal = suspending?.signal ?? deps.suspendSignal;
  let outcome;
  /** A sidecar of the run's build served this wait: its events went to the gateway from there. */
  let relayed = false;
  /** Why the run is left as it is for another sidecar (its replay record's key is not held here). */
  let keptFor: string | undefined;
  const ctx: SuspendContext = {
    scope,
    scopeKey: deps.init.scopeKey,
    codeModeRunId,
    execCallId: rec.execCallId,
    config,
    catalogVersion: run.catalog?.version ?? rec.catalogVersion,
    link,
    sealer,
    signal,
    // `from`: kept at its stored snapshot if a store outage holds the resumed VM's next call back (./checkpoints.ts).
    claim: { token, generation, pending, answers, from: { envelope, reason: reasonFromWire(rec.reason), outputBytes: outputBytesUsed } },
  };
  // An older orchestrator takes no checkpoint and no invalidation: the resumed VM runs as before them.
  if (link.takesCheckpoints) seg.checkpoints = deps.checkpoints?.(seg, ctx);
  // The replay record names the snapshot this segment resumes (./../exec/replay-record.ts).
  seg.resumesGeneration = generation;
  try {
    const task: Omit<ResumeTask, "port"> = {
      kind: "resume",
      envelope,
      pending: [...pending.values()].map((p) =>
        p.dueAtMs !== undefined ? { callId: p.callId, kind: p.kind, dueAtMs: p.dueAtMs } : { callId: p.callId, kind: p.kind },
      ),
      answers: delivered,
      limits: {
        ...limitsOf(config, link.takesCheckpoints),
        ...(deps.awaiting ? { timeoutMs: Math.max(MIN_SEGMENT_MS, config.timeoutMs - deps.awaiting.budget.usedMs) } : {}),
      },
      outputBytesUsed,
      ...(run.catalog ? { allToolsJson: run.catalog.guest.allToolsJson, convenienceJson: run.catalog.guest.convenienceJson } : {}),
    };
    outcome = await seg.run(task, [running.signal], suspendSignal);
    // A snapshot of another build: served by a sidecar of that build while one is attached
    // (./wait-relay.ts), else rebuilt here by replaying the run's record (./rebuild.ts).
    const build = madeByOtherBuild(outcome) ? envelopeBuild(envelope) : undefined;
    if (build && deps.relay) {
      // From here the claim may be another sidecar's: this one stops reading the run's answers.
      clearTimeout(late);
      polling.abort();
      await poller;
      relayed = (await deps.relay(build, token)) === "served";
      if (!relayed) {
        polling = new AbortController();
        poll();
      }
    }
    if (!relayed && madeByOtherBuild(outcome)) {
      const rebuilt = await rebuildByReplay(link, scope, codeModeRunId, generation, log, sealer).catch(
        (err: unknown): Rebuilt => ({ ok: false, reason: `its record could not be read (${(err as Error).message})` }),
      );
      if (rebuilt.ok) {
        // Answers that reached the segment while it was rebuilt are given to the rebuilt VM too.
        const given = new Set(task.answers.map((a) => a.callId));
        const late = [...seg.answers].filter(([id]) => !given.has(id) && pending.has(id)).map(([id, a]) => answerMessage(id, a));
        outcome = await seg.run({ ...task, envelope: rebuilt.envelope, answers: [...task.answers, ...late] }, [running.signal], suspendSignal);
      } else {
        const error = `this code mode run was suspended by another sandbox build and cannot be rebuilt on this one: ${rebuilt.reason}`;
        // A record sealed under a key this sidecar lacks says nothing against the run: it is left for a sidecar that has the key.
        if (rebuilt.keep) keptFor = `${error}; the run is kept for a sidecar that has that key.`;
        outcome = { status: "failed" as const, error, code: "internal_error" as const, outputBytes: outputBytesUsed };
      }
    }
  } finally {
    signal.removeEventListener("abort", onCancel);
    drainSignal.removeEventListener("abort", onDrained);
    clearTimeout(late);
    polling.abort();
    await poller;
    suspending?.done();
  }
  if (relayed) return;
  if (keptFor) {
    await release(true);
    return seg.finish({ status: "failed", error: keptFor, code: "runtime_unavailable" }, outputBytesUsed);
  }
  if (deps.awaiting) deps.awaiting.budget.usedMs += outcome.cpuMs ?? 0;
  await endSegment(seg, outcome, ctx);
}

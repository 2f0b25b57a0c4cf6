/**
 * A person's approval of a nested call, as a segment keeps it. A gateway may answer a call
 * with "approval pending" (a reason, an optional expiry): the call stays pending, its
 * expiry clamped to the run's `approvalTimeoutMs`, until a decision (a result, an error, an
 * ApprovalDenied) or the expiry (the guest gets ApprovalExpired). With `approvalMode`
 * "error" the guest gets ApprovalRequired at once instead. A segment's approvals (which
 * calls await a person, their expiry timers, and what each went through, for telemetry and
 * the trajectory) are kept by its `SegmentApprovals`.
 */
import type { ApprovalPending } from "../../gen/codemode/common/v1/common_pb.js";
import { ServiceError } from "../../protocol/service-error.js";
import type { CodeModeConfig } from "../../shared/config.js";
import { APPROVAL_ERRORS, approvalExpired, clampApproval, type AnswerValue, type ApprovalMark } from "../../shared/link-wire.js";
import type { Logger } from "../../shared/logger.js";

export { clampApproval };

/** Longest approval reason a gateway may send (characters). */
export const MAX_APPROVAL_REASON = 2_000;

export type Approval = ApprovalMark["approval"];
export type ApprovalDecision = "pending" | "approved" | "denied" | "expired" | "required";
export type ApprovalEntry = { callId: string; toolId: string; reason: string; requestedAtMs: number; decision: ApprovalDecision; decidedAtMs: number };

/** A gateway's ApprovalPending, checked: a past expiry or an overlong reason is INVALID_ARGUMENT. Expiry 0 stays 0 (the run's default). */
export function approvalMarkOf(p: ApprovalPending, now = Date.now()): ApprovalMark {
  if (p.reason.length > MAX_APPROVAL_REASON) {
    throw new ServiceError("invalid_argument", `approval_pending.reason is ${p.reason.length} characters, over ${MAX_APPROVAL_REASON}`);
  }
  const expiresAtMs = Number(p.expiresAtMs);
  if (expiresAtMs < 0 || (expiresAtMs !== 0 && expiresAtMs <= now)) {
    throw new ServiceError("invalid_argument", `approval_pending.expires_at_ms (${expiresAtMs}) is in the past; send 0 for the run's approvalTimeoutMs`);
  }
  return { approval: { reason: p.reason, expiresAtMs, requestedAtMs: now } };
}

/** How an answer decides a call that awaited approval. */
export function decisionOf(a: AnswerValue): ApprovalDecision {
  if (a.ok) return "approved";
  if (a.error.name === APPROVAL_ERRORS.denied) return "denied";
  if (a.error.name === APPROVAL_ERRORS.expired) return "expired";
  if (a.error.name === APPROVAL_ERRORS.required) return "required";
  return "approved";
}

/** The guest's error when a run's approvalMode is "error". */
export function approvalRequired(toolName: string, reason: string): AnswerValue {
  const why = reason ? `: ${reason}` : "";
  return { ok: false, error: { name: APPROVAL_ERRORS.required, message: `${toolName} needs a person's approval${why}` } };
}

/** What one segment saw of approvals, by call id, in the order they were asked for. */
export class ApprovalLog {
  private readonly entries = new Map<string, ApprovalEntry>();

  get size(): number {
    return this.entries.size;
  }

  get(callId: string): ApprovalEntry | undefined {
    return this.entries.get(callId);
  }

  asked(callId: string, toolId: string, a: Approval): void {
    this.entries.set(callId, { callId, toolId, reason: a.reason, requestedAtMs: a.requestedAtMs, decision: "pending", decidedAtMs: 0 });
  }

  /** A call asked for here (or in an earlier segment, `asked` first) was decided. */
  decided(callId: string, decision: ApprovalDecision, atMs = Date.now()): ApprovalEntry | undefined {
    const e = this.entries.get(callId);
    if (e?.decision !== "pending") return undefined;
    e.decision = decision;
    e.decidedAtMs = atMs;
    return e;
  }

  list(): ApprovalEntry[] {
    return [...this.entries.values()];
  }
}

/** What a segment's approvals act through. */
export type ApprovalHooks = {
  config: CodeModeConfig;
  /** The segment can suspend for a person (an exec or a wait; not tool_search_code or codemode.run). */
  pauses: boolean;
  log: Logger;
  /** Answers a live call through the registry (ApprovalRequired). */
  answerLive(callId: string, answer: AnswerValue): void;
  /** A live call's approval ran out: the registry answers ApprovalExpired and refuses a late decision. */
  expireLive(callId: string): void;
  /** Answers a call of an earlier segment (its expiry is the store's). */
  answer(callId: string, answer: AnswerValue): void;
  /** Tells the VM that the call awaits a person. */
  tell(callId: string): void;
};

/** One segment's approvals: the calls that await a person now, their expiry timers, and the log. */
export class SegmentApprovals {
  readonly log = new ApprovalLog();
  /** Calls that await a person's approval now, live here or from an earlier segment. */
  readonly awaiting = new Map<string, Approval>();
  private readonly expiries = new Map<string, NodeJS.Timeout>();

  constructor(private readonly hooks: ApprovalHooks) {}

  /**
   * A call awaits a person's approval: from the gateway's answer to a live call here
   * (`fromGateway`, clamped to the run's approvalTimeoutMs; approvalMode "error" answers
   * ApprovalRequired instead and returns undefined), or from an earlier segment's stored mark.
   */
  await(callId: string, toolId: string, toolName: string, mark: Approval, fromGateway: boolean): Approval | undefined {
    const { config, pauses, log } = this.hooks;
    const kept = fromGateway ? clampApproval(mark, config.approvalTimeoutMs) : mark;
    if (this.log.get(callId)?.decision !== "pending") this.log.asked(callId, toolId, kept);
    if (fromGateway && (config.approvalMode === "error" || !pauses)) {
      this.log.decided(callId, "required");
      this.hooks.answerLive(callId, approvalRequired(toolName || toolId, kept.reason));
      return undefined;
    }
    this.awaiting.set(callId, kept);
    log.info({ callId, toolId, expiresInMs: kept.expiresAtMs - Date.now() }, "a nested call awaits a person's approval");
    const expire = () => (fromGateway ? this.hooks.expireLive(callId) : this.hooks.answer(callId, approvalExpired(toolName || toolId, kept)));
    // Never at once: the registry keeps the approval only once this returns.
    this.expiries.set(callId, setTimeout(expire, Math.min(Math.max(0, kept.expiresAtMs - Date.now()), 2 ** 31 - 1)).unref());
    this.hooks.tell(callId);
    return kept;
  }

  /** An answer reached the call: a decision, when it awaited a person. */
  answered(callId: string, answer: AnswerValue): void {
    if (!this.awaiting.delete(callId)) return;
    clearTimeout(this.expiries.get(callId));
    this.expiries.delete(callId);
    const e = this.log.decided(callId, decisionOf(answer));
    if (e) this.hooks.log.info({ callId, decision: e.decision, waitedMs: e.decidedAtMs - e.requestedAtMs }, "approval decided");
  }

  /** The segment ended: no expiry fires any more. */
  stop(): void {
    for (const t of this.expiries.values()) clearTimeout(t);
    this.expiries.clear();
  }

  /** A nested call's trajectory fields, when it awaited a person. */
  nestedFields(callId: string) {
    const a = this.log.get(callId);
    return a
      ? { approval: a.decision, approvalReason: a.reason, approvalRequestedAtMs: BigInt(a.requestedAtMs), approvalDecidedAtMs: BigInt(a.decidedAtMs) }
      : {};
  }

  /** An earlier call settled here: how its approval was decided, for the trajectory. */
  resolvedFields(callId: string) {
    const a = this.log.get(callId);
    return a && a.decision !== "pending" ? { approval: a.decision, approvalDecidedAtMs: BigInt(a.decidedAtMs) } : {};
  }
}

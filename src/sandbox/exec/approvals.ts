/**
 * A person's approval of a nested call, as a segment keeps it. A gateway may answer a call
 * with "approval pending" (a reason, an optional expiry): the call stays pending, its
 * expiry clamped to the run's `approvalTimeoutMs`, until a decision (a result, an error, an
 * ApprovalDenied) or the expiry (the guest gets ApprovalExpired). With `approvalMode`
 * "error" the guest gets ApprovalRequired at once instead. What each call went through is
 * recorded here for the result's telemetry and the trajectory.
 */
import type { ApprovalPending } from "../../gen/codemode/common/v1/common_pb.js";
import { ServiceError } from "../../protocol/service-error.js";
import { APPROVAL_ERRORS, type AnswerValue, type ApprovalMark } from "../../shared/link-wire.js";

export { clampApproval } from "../../shared/link-wire.js";

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

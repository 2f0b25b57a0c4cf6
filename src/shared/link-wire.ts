/**
 * What a suspended VM awaits, and answers to it, as SidecarLink carries them: one
 * mapping used by the sidecar (storing and resuming runs, routing answers) and by the
 * orchestrator (keeping them), so the two ends cannot drift apart.
 */
import { PendingKind as WirePendingKind, type ToolAnswer } from "../gen/codemode/orchestrator/v1/link_pb.js";
import { WaitReason } from "../gen/codemode/common/v1/common_pb.js";

/** The seed's refusals of a `wait`, as the orchestrator sends them and the sidecar falls back to. */
export const RUN_MESSAGES = {
  unavailable: "code mode run is unavailable or expired.",
  session: "code mode run belongs to a different session.",
  run: "code mode run belongs to a different agent run.",
  busy: "a wait is already in flight for this code mode run.",
  lost: "code mode run was lost: the sandbox running it stopped after its program had made a tool call since its last checkpoint, so it cannot continue without repeating that call; start the work again with exec.",
  vanished:
    "code mode run was lost: the sandbox running it stopped before any of its state was stored (its program was computing, or had waited on tools for less than checkpointAfterMs); start the work again with exec.",
  cap: "too many suspended code mode runs.",
  missingRunId: "wait requires the runId of a waiting result.",
  disabled: "code mode is disabled for this run.",
} as const;

/** The start of the refusal of an exec on a run whose surface is not code mode. */
export const INACTIVE_PREFIX = "code mode is not active for this run: ";

/** Why a suspended run waits: tool answers, a yield, or (beyond the seed) only people's approvals. */
export type SuspendReason = "pending_tools" | "yield" | "approval";

const REASONS_TO_WIRE: Record<SuspendReason, WaitReason> = { pending_tools: WaitReason.PENDING_TOOLS, yield: WaitReason.YIELD, approval: WaitReason.APPROVAL };

export function reasonToWire(reason: SuspendReason): WaitReason {
  return REASONS_TO_WIRE[reason];
}

/** Unknown or unset reasons read as pending_tools. */
export function reasonFromWire(reason: WaitReason): SuspendReason {
  return reason === WaitReason.YIELD ? "yield" : reason === WaitReason.APPROVAL ? "approval" : "pending_tools";
}

/** A tool call, a catalog request (search/describe/API), a yield, or an armed timer. */
export type PendingKind = "call" | "request" | "yield" | "timer";

/** A tool's answer, without the call id it answers. */
export type AnswerValue = ({ ok: true; json: string } | { ok: false; error: { name: string; message: string } }) & {
  /** The gateway marked it secret: a replay record keeps that it came, not what it said. */
  secret?: true;
};

/**
 * A gateway's "a person is being asked to approve this call": not an answer the guest sees.
 * The call stays pending until a decision (an AnswerValue) or `expiresAtMs` passes.
 */
export type ApprovalMark = { approval: { reason: string; expiresAtMs: number; requestedAtMs: number } };

/** What a gateway may send for a nested call: an answer, or that it awaits approval. */
export type GatewayAnswer = AnswerValue | ApprovalMark;

export function isApprovalMark(a: GatewayAnswer): a is ApprovalMark {
  return "approval" in a;
}

/**
 * An approval as a run keeps it: no later than `approvalTimeoutMs` after it was asked for
 * (an expiry of 0 means exactly that long).
 */
export function clampApproval(a: ApprovalMark["approval"], approvalTimeoutMs: number): ApprovalMark["approval"] {
  const latest = a.requestedAtMs + approvalTimeoutMs;
  return { ...a, expiresAtMs: a.expiresAtMs > 0 ? Math.min(a.expiresAtMs, latest) : latest };
}

/**
 * How long a suspended run is kept past the expiry of an approval it awaits (at least), so
 * a `wait` after the expiry can still tell the program ApprovalExpired.
 */
export const APPROVAL_KEEP_MS = 10 * 60_000;

/** The guest-visible error names of the approval flow (a denial is an error answer with the first). */
export const APPROVAL_ERRORS = { denied: "ApprovalDenied", expired: "ApprovalExpired", required: "ApprovalRequired" } as const;

/** What the guest gets for a call whose approval ran out without a decision. */
export function approvalExpired(tool: string, a: ApprovalMark["approval"]): AnswerValue {
  const s = Math.round((a.expiresAtMs - a.requestedAtMs) / 1000);
  return { ok: false, error: { name: APPROVAL_ERRORS.expired, message: `no decision came within ${s} s for the approval of ${tool}.` } };
}

const TO_WIRE: Record<PendingKind, WirePendingKind> = {
  call: WirePendingKind.TOOL_CALL,
  request: WirePendingKind.CATALOG_REQUEST,
  yield: WirePendingKind.YIELD,
  timer: WirePendingKind.TIMER,
};

export function pendingKindToWire(kind: PendingKind): WirePendingKind {
  return TO_WIRE[kind];
}

/** Unknown or unset kinds read as tool calls (the model is told about those). */
export function pendingKindFromWire(kind: WirePendingKind): PendingKind {
  if (kind === WirePendingKind.CATALOG_REQUEST) return "request";
  if (kind === WirePendingKind.YIELD) return "yield";
  if (kind === WirePendingKind.TIMER) return "timer";
  return "call";
}

/** When a stored answer was taken, and (for a decision) when its approval was asked for, and why. */
export type AnswerMeta = { answeredAtMs?: number | undefined; approvalRequestedAtMs?: number | undefined; approvalReason?: string | undefined };

export function answerToWire(callId: string, a: GatewayAnswer, times: AnswerMeta = {}) {
  const answeredAtMs = BigInt(times.answeredAtMs ?? 0);
  if (isApprovalMark(a)) {
    const { reason, expiresAtMs, requestedAtMs } = a.approval;
    return {
      callId,
      outcome: { case: "approvalPending", value: { reason, expiresAtMs: BigInt(expiresAtMs) } } as const,
      approvalRequestedAtMs: BigInt(requestedAtMs),
      answeredAtMs,
    };
  }
  return {
    callId,
    outcome: a.ok ? ({ case: "resultJson", value: a.json } as const) : ({ case: "error", value: a.error } as const),
    approvalRequestedAtMs: BigInt(times.approvalRequestedAtMs ?? 0),
    approvalReason: times.approvalReason ?? "",
    answeredAtMs,
    secret: a.secret === true,
  };
}

export function answerMetaFromWire(a: ToolAnswer): AnswerMeta {
  return { answeredAtMs: Number(a.answeredAtMs), approvalRequestedAtMs: Number(a.approvalRequestedAtMs), approvalReason: a.approvalReason };
}

/** The answer a ToolAnswer carries; undefined when it sets no outcome. */
export function answerFromWire(a: ToolAnswer): GatewayAnswer | undefined {
  const secret = a.secret ? { secret: true as const } : {};
  if (a.outcome.case === "resultJson") return { ok: true, json: a.outcome.value, ...secret };
  if (a.outcome.case === "error") return { ok: false, error: { name: a.outcome.value.name || "Error", message: a.outcome.value.message }, ...secret };
  if (a.outcome.case === "approvalPending") {
    const { reason, expiresAtMs } = a.outcome.value;
    return { approval: { reason, expiresAtMs: Number(expiresAtMs), requestedAtMs: Number(a.approvalRequestedAtMs) } };
  }
  return undefined;
}

/**
 * The unary SidecarLink methods a sidecar may send as a LinkCall on its Attach stream: the
 * one list both ends read (the sidecar's `rpc`, the orchestrator's dispatch).
 */
export const LINK_CALL_METHODS = [
  "resolveRun",
  "suspendRun",
  "claimRun",
  "releaseRun",
  "routeToolResult",
  "loadSession",
  "commitSession",
  "invalidateRun",
] as const;
export type LinkCallMethod = (typeof LINK_CALL_METHODS)[number];

/**
 * What a suspended VM awaits, and answers to it, as SidecarLink carries them: one
 * mapping used by the sidecar (storing and resuming runs, routing answers) and by the
 * orchestrator (keeping them), so the two ends cannot drift apart.
 */
import { PendingKind as WirePendingKind, type ToolAnswer } from "../gen/codemode/orchestrator/v1/link_pb.js";

/** The seed's refusals of a `wait`, as the orchestrator sends them and the sidecar falls back to. */
export const RUN_MESSAGES = {
  unavailable: "code mode run is unavailable or expired.",
  session: "code mode run belongs to a different session.",
  run: "code mode run belongs to a different agent run.",
  busy: "a wait is already in flight for this code mode run.",
  cap: "too many suspended code mode runs.",
  missingRunId: "wait requires the runId of a waiting result.",
  disabled: "code mode is disabled for this run.",
} as const;

/** The start of the refusal of an exec on a run whose surface is not code mode. */
export const INACTIVE_PREFIX = "code mode is not active for this run: ";

/** A tool call, a catalog request (search/describe/API), a yield, or an armed timer. */
export type PendingKind = "call" | "request" | "yield" | "timer";

/** A tool's answer, without the call id it answers. */
export type AnswerValue = { ok: true; json: string } | { ok: false; error: { name: string; message: string } };

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

export function answerToWire(callId: string, a: AnswerValue) {
  return { callId, outcome: a.ok ? ({ case: "resultJson", value: a.json } as const) : ({ case: "error", value: a.error } as const) };
}

/** The answer a ToolAnswer carries; undefined when it sets neither outcome. */
export function answerFromWire(a: ToolAnswer): AnswerValue | undefined {
  if (a.outcome.case === "resultJson") return { ok: true, json: a.outcome.value };
  if (a.outcome.case === "error") return { ok: false, error: { name: a.outcome.value.name || "Error", message: a.outcome.value.message } };
  return undefined;
}

/**
 * The unary SidecarLink methods a sidecar may send as a LinkCall on its Attach stream: the
 * one list both ends read (the sidecar's `rpc`, the orchestrator's dispatch).
 */
export const LINK_CALL_METHODS = ["resolveRun", "suspendRun", "claimRun", "releaseRun", "routeToolResult"] as const;
export type LinkCallMethod = (typeof LINK_CALL_METHODS)[number];

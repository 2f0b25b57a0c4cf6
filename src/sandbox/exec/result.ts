/**
 * Builds the wire Result of an exec or wait, and the same result in the seed's exact
 * JSON shape (`model_json`), which the gateway can hand to the model unchanged.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import { ErrorCode, Refusal, ResultStatus, WaitReason, type ResultSchema } from "../../gen/codemode/common/v1/common_pb.js";
import { INACTIVE_PREFIX, RUN_MESSAGES } from "../../shared/link-wire.js";
import type { ErrorCodeName } from "../pool/task-protocol.js";
import type { ApprovalEntry } from "./approvals.js";
import type { SessionUse } from "./session-cell.js";
import type { SuspendReason } from "../../shared/link-wire.js";

export type OutputItem = { kind: "text" | "json"; data: string };

export type TelemetryInput = {
  catalogSize: number;
  sources: { core: number; mcp: number; client: number };
  coreSourceName: string;
  searchCount: number;
  describeCount: number;
  callCount: number;
  modelVisibleTools: readonly string[];
  durationMs: number;
  snapshotBytes?: number;
  outputBytes: number;
  /** Approvals asked for or decided in the segment (wire telemetry only; the model's is the seed's). */
  approvals?: readonly ApprovalEntry[];
  /** The segment's use of the session store, when it made one (wire telemetry only). */
  sessionStore?: SessionUse;
};

/** Why a run waits; `approval` (beyond the seed) when every call it awaits waits for a person. */
export type WaitReasonName = SuspendReason;
/** A call the model is told is still pending; `approval` while a person is being asked. */
export type PendingCall = { callId: string; toolId: string; toolName: string; approval?: { reason: string; expiresAtMs: number } };

export type ResultInput =
  | { status: "completed"; valueJson: string }
  | { status: "failed"; error: string; code?: ErrorCodeName | undefined }
  | { status: "waiting"; codeModeRunId: string; reason: WaitReasonName; pending: PendingCall[] };

const CODE_ENUM: Record<ErrorCodeName, ErrorCode> = {
  invalid_input: ErrorCode.INVALID_INPUT,
  runtime_unavailable: ErrorCode.RUNTIME_UNAVAILABLE,
  timeout: ErrorCode.TIMEOUT,
  output_limit_exceeded: ErrorCode.OUTPUT_LIMIT_EXCEEDED,
  snapshot_limit_exceeded: ErrorCode.SNAPSHOT_LIMIT_EXCEEDED,
  internal_error: ErrorCode.INTERNAL_ERROR,
};

const REFUSALS: ReadonlyMap<string, Refusal> = new Map([
  [RUN_MESSAGES.unavailable, Refusal.RUN_UNAVAILABLE],
  [RUN_MESSAGES.session, Refusal.OTHER_SESSION],
  [RUN_MESSAGES.run, Refusal.OTHER_AGENT_RUN],
  [RUN_MESSAGES.busy, Refusal.WAIT_IN_FLIGHT],
  [RUN_MESSAGES.lost, Refusal.RUN_LOST],
  [RUN_MESSAGES.vanished, Refusal.RUN_LOST],
  [RUN_MESSAGES.cap, Refusal.TOO_MANY_SUSPENDED],
  [RUN_MESSAGES.missingRunId, Refusal.MISSING_RUN_ID],
  [RUN_MESSAGES.disabled, Refusal.CODE_MODE_DISABLED],
]);

/**
 * Which refusal an invalid_input failure is, from its message: the messages are the
 * seed's constants (and ours), so the one mapping lives here, beside the wire result.
 */
export function refusalOf(error: string): Refusal {
  const known = REFUSALS.get(error);
  if (known !== undefined) return known;
  if (error.startsWith(INACTIVE_PREFIX)) return Refusal.CODE_MODE_INACTIVE;
  return Refusal.INVALID_PROGRAM;
}

/** The seed's name of a wire error code (undefined for UNSPECIFIED or unknown values). */
export function errorCodeName(code: ErrorCode): ErrorCodeName | undefined {
  for (const [name, value] of Object.entries(CODE_ENUM)) if (value === code) return name as ErrorCodeName;
  return undefined;
}

function modelTelemetry(t: TelemetryInput): Record<string, unknown> {
  const out: Record<string, unknown> = {
    catalogSize: t.catalogSize,
    sources: { [t.coreSourceName]: t.sources.core, mcp: t.sources.mcp, client: t.sources.client },
    searchCount: t.searchCount,
    describeCount: t.describeCount,
    callCount: t.callCount,
    modelVisibleTools: [...t.modelVisibleTools],
    durationMs: Math.round(t.durationMs * 100) / 100,
  };
  if (t.snapshotBytes !== undefined) out.snapshotBytes = t.snapshotBytes;
  return out;
}

const WAIT_REASONS: Record<WaitReasonName, WaitReason> = {
  pending_tools: WaitReason.PENDING_TOOLS,
  yield: WaitReason.YIELD,
  approval: WaitReason.APPROVAL,
};

/** The seed's pending call; one awaiting a person's approval says so, with the reason. */
function modelPending(p: PendingCall): Record<string, unknown> {
  const out: Record<string, unknown> = { id: p.callId, toolId: p.toolId, name: p.toolName };
  if (p.approval) {
    out.awaitingApproval = true;
    if (p.approval.reason) out.approvalReason = p.approval.reason;
  }
  return out;
}

/** What the model reads when a person is being asked: tell the user, do not retry. */
function approvalNote(asking: readonly PendingCall[]): string {
  const names = [...new Set(asking.map((p) => p.toolName || p.toolId))].join(", ");
  const n = asking.length;
  return `A person is being asked to approve ${n === 1 ? "a tool call" : `${n} tool calls`} (${names}). Tell the user what is awaiting approval and why; do not call the tool again. Call wait with this runId to continue once they decide.`;
}

function modelOutput(items: readonly OutputItem[]): unknown[] {
  return items.map((o) => (o.kind === "text" ? { type: "text", text: o.data } : { type: "json", value: JSON.parse(o.data) as unknown }));
}

export function buildResult(r: ResultInput, output: readonly OutputItem[], t: TelemetryInput): MessageInitShape<typeof ResultSchema> {
  const model: Record<string, unknown> = { status: r.status };
  const telemetry = {
    catalogSize: t.catalogSize,
    sources: { openclaw: t.sources.core, mcp: t.sources.mcp, client: t.sources.client },
    searchCount: t.searchCount,
    describeCount: t.describeCount,
    callCount: t.callCount,
    modelVisibleTools: [...t.modelVisibleTools],
    durationMs: t.durationMs,
    snapshotBytes: BigInt(t.snapshotBytes ?? 0),
    outputBytes: BigInt(t.outputBytes),
    ...(t.sessionStore
      ? {
          sessionStore: {
            loads: t.sessionStore.loads,
            stores: t.sessionStore.stores,
            keysWritten: t.sessionStore.keysWritten,
            bytesWritten: BigInt(t.sessionStore.bytesWritten),
            keys: t.sessionStore.keys,
            bytes: BigInt(t.sessionStore.bytes),
          },
        }
      : {}),
    approvals: (t.approvals ?? []).map((a) => ({
      callId: a.callId,
      toolId: a.toolId,
      decision: a.decision,
      reason: a.reason,
      requestedAtMs: BigInt(a.requestedAtMs),
      decidedAtMs: BigInt(a.decidedAtMs),
    })),
  };
  const wireOutput = output.map((o) => ({ kind: { case: o.kind, value: o.data } as const }));
  const base = { output: wireOutput, telemetry };
  let wire: MessageInitShape<typeof ResultSchema>;
  switch (r.status) {
    case "completed":
      model.value = JSON.parse(r.valueJson) as unknown;
      wire = { ...base, status: ResultStatus.COMPLETED, valueJson: r.valueJson };
      break;
    case "failed":
      model.error = r.error;
      if (r.code) model.code = r.code;
      wire = {
        ...base,
        status: ResultStatus.FAILED,
        error: r.error,
        code: r.code ? CODE_ENUM[r.code] : ErrorCode.UNSPECIFIED,
        refusal: r.code === "invalid_input" ? refusalOf(r.error) : Refusal.UNSPECIFIED,
      };
      break;
    case "waiting":
      model.runId = r.codeModeRunId;
      model.reason = r.reason;
      if (r.pending.length > 0) model.pendingToolCalls = r.pending.map(modelPending);
      {
        const asking = r.pending.filter((p) => p.approval);
        if (asking.length > 0) model.approval = approvalNote(asking);
      }
      wire = {
        ...base,
        status: ResultStatus.WAITING,
        codeModeRunId: r.codeModeRunId,
        reason: WAIT_REASONS[r.reason],
        pendingToolCalls: r.pending.map((p) => ({
          callId: p.callId,
          toolId: p.toolId,
          toolName: p.toolName,
          ...(p.approval ? { awaitingApproval: true, approvalReason: p.approval.reason, approvalExpiresAtMs: BigInt(p.approval.expiresAtMs) } : {}),
        })),
      };
      break;
  }
  if (output.length > 0) model.output = modelOutput(output);
  model.telemetry = modelTelemetry(t);
  return { ...wire, modelJson: JSON.stringify(model) };
}

/**
 * Builds the wire Result of an exec or wait, and the same result in the seed's exact
 * JSON shape (`model_json`), which the gateway can hand to the model unchanged.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import { ErrorCode, Refusal, ResultStatus, WaitReason, type ResultSchema } from "../../gen/codemode/common/v1/common_pb.js";
import { INACTIVE_PREFIX, RUN_MESSAGES } from "../../shared/link-wire.js";
import type { ErrorCodeName } from "../pool/task-protocol.js";

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
};

export type ResultInput =
  | { status: "completed"; valueJson: string }
  | { status: "failed"; error: string; code?: ErrorCodeName | undefined }
  | { status: "waiting"; codeModeRunId: string; reason: "pending_tools" | "yield"; pending: Array<{ callId: string; toolId: string; toolName: string }> };

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
      if (r.pending.length > 0) model.pendingToolCalls = r.pending.map((p) => ({ id: p.callId, toolId: p.toolId, name: p.toolName }));
      wire = {
        ...base,
        status: ResultStatus.WAITING,
        codeModeRunId: r.codeModeRunId,
        reason: r.reason === "yield" ? WaitReason.YIELD : WaitReason.PENDING_TOOLS,
        pendingToolCalls: r.pending.map((p) => ({ callId: p.callId, toolId: p.toolId, toolName: p.toolName })),
      };
      break;
  }
  if (output.length > 0) model.output = modelOutput(output);
  model.telemetry = modelTelemetry(t);
  return { ...wire, modelJson: JSON.stringify(model) };
}

/** Converts the wire CodeModeConfig and ToolSearchConfig (all fields optional) into config layers, and back. */
import type { CodeModeConfig as WireConfig, ToolSearchConfig as WireToolSearch } from "../gen/codemode/common/v1/common_pb.js";
import type { CodeModeConfigInput, ToolSearchConfigInput } from "./config.js";

export function configLayerFromWire(c: WireConfig | undefined): Partial<CodeModeConfigInput> {
  if (!c) return {};
  const out: Record<string, unknown> = {};
  if (c.enabled !== undefined) out.enabled = c.enabled;
  if (c.timeoutMs !== undefined) out.timeoutMs = c.timeoutMs;
  if (c.memoryLimitBytes !== undefined) out.memoryLimitBytes = Number(c.memoryLimitBytes);
  if (c.maxOutputBytes !== undefined) out.maxOutputBytes = Number(c.maxOutputBytes);
  if (c.maxSnapshotBytes !== undefined) out.maxSnapshotBytes = Number(c.maxSnapshotBytes);
  if (c.maxPendingToolCalls !== undefined) out.maxPendingToolCalls = c.maxPendingToolCalls;
  if (c.snapshotTtlSeconds !== undefined) out.snapshotTtlSeconds = c.snapshotTtlSeconds;
  if (c.searchDefaultLimit !== undefined) out.searchDefaultLimit = c.searchDefaultLimit;
  if (c.maxSearchLimit !== undefined) out.maxSearchLimit = c.maxSearchLimit;
  if (c.languages.length > 0) out.languages = [...c.languages];
  if (c.coreSourceName !== undefined) out.coreSourceName = c.coreSourceName;
  if (c.searchIncludesMcp !== undefined) out.searchIncludesMcp = c.searchIncludesMcp;
  if (c.maxToolCallsPerRun !== undefined) out.maxToolCallsPerRun = c.maxToolCallsPerRun;
  if (c.maxSearchesPerRun !== undefined) out.maxSearchesPerRun = c.maxSearchesPerRun;
  if (c.approvalTimeoutMs !== undefined) out.approvalTimeoutMs = c.approvalTimeoutMs;
  if (c.approvalMode !== undefined) out.approvalMode = c.approvalMode;
  if (c.sessionStore !== undefined) out.sessionStore = c.sessionStore;
  if (c.maxSessionValueBytes !== undefined) out.maxSessionValueBytes = c.maxSessionValueBytes;
  if (c.maxSessionKeys !== undefined) out.maxSessionKeys = c.maxSessionKeys;
  if (c.maxSessionBytes !== undefined) out.maxSessionBytes = c.maxSessionBytes;
  if (c.sessionTtlSeconds !== undefined) out.sessionTtlSeconds = c.sessionTtlSeconds;
  if (c.awaitResults !== undefined) out.awaitResults = c.awaitResults;
  if (c.maxAwaitMs !== undefined) out.maxAwaitMs = c.maxAwaitMs;
  if (c.recordForReplay !== undefined) out.recordForReplay = c.recordForReplay;
  if (c.checkpointAfterMs !== undefined) out.checkpointAfterMs = c.checkpointAfterMs;
  return out as Partial<CodeModeConfigInput>;
}

export function configLayerToWire(layer: Partial<CodeModeConfigInput>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...layer };
  for (const k of ["memoryLimitBytes", "maxOutputBytes", "maxSnapshotBytes"] as const) {
    if (typeof layer[k] === "number") out[k] = BigInt(Math.trunc(layer[k]));
  }
  if (layer.languages) out.languages = [...layer.languages];
  return out;
}

export function toolSearchLayerFromWire(c: WireToolSearch | undefined): Partial<ToolSearchConfigInput> {
  if (!c) return {};
  const out: Record<string, unknown> = {};
  if (c.enabled !== undefined) out.enabled = c.enabled;
  if (c.mode !== undefined) out.mode = c.mode;
  if (c.codeTimeoutMs !== undefined) out.codeTimeoutMs = c.codeTimeoutMs;
  if (c.searchDefaultLimit !== undefined) out.searchDefaultLimit = c.searchDefaultLimit;
  if (c.maxSearchLimit !== undefined) out.maxSearchLimit = c.maxSearchLimit;
  return out as Partial<ToolSearchConfigInput>;
}

/**
 * The run-level config of the Code Mode for MCP surface (McpRunConfig on the wire),
 * parsed in one place for the orchestrator (OpenRun, DescribeSurface) and the sidecar
 * (each `codemode.run`). It holds the host's default and ceiling of the two limits code
 * mode's own config has no field for; `timeoutMs` and `maxMemoryBytes` come from the run's
 * CodeModeConfig (`timeoutMs`, `memoryLimitBytes`). Numbers are clamped; wrong types are
 * refused with the key named, as in ../config.ts.
 */
import type { McpRunConfig as WireMcpRun } from "../../gen/codemode/common/v1/common_pb.js";
import { ConfigError } from "../config.js";

export const MCP_RUN_LIMITS = {
  maxLogBytes: { default: 65_536, min: 1_024, max: 1_048_576 },
  maxToolCalls: { default: 100, min: 1, max: 10_000 },
} as const;

export type McpRunConfig = Readonly<{ enabled: boolean; maxLogBytes: number; maxToolCalls: number }>;
export type McpRunLayer = Partial<{ enabled: boolean; maxLogBytes: number; maxToolCalls: number }>;

function clamp(key: keyof typeof MCP_RUN_LIMITS, value: unknown): number {
  const { min, max } = MCP_RUN_LIMITS[key];
  if (typeof value !== "number" || !Number.isFinite(value))
    throw new ConfigError(`mcpRun.${key} must be a finite number, got ${JSON.stringify(value) ?? String(value)}`);
  return Math.min(max, Math.max(min, Math.trunc(value)));
}

/** Layers merged in order (later wins), then defaulted and clamped. */
export function parseMcpRunConfig(...layers: Array<McpRunLayer | undefined>): McpRunConfig {
  const merged: Record<string, unknown> = {};
  for (const layer of layers) {
    if (!layer) continue;
    for (const [k, v] of Object.entries(layer)) if (v !== undefined) merged[k] = v;
  }
  for (const k of Object.keys(merged)) {
    if (k !== "enabled" && !(k in MCP_RUN_LIMITS)) throw new ConfigError(`mcpRun.${k} is not a known key`);
  }
  if (merged.enabled !== undefined && typeof merged.enabled !== "boolean")
    throw new ConfigError(`mcpRun.enabled must be a boolean, got ${JSON.stringify(merged.enabled)}`);
  return Object.freeze({
    enabled: (merged.enabled as boolean | undefined) ?? false,
    maxLogBytes: merged.maxLogBytes === undefined ? MCP_RUN_LIMITS.maxLogBytes.default : clamp("maxLogBytes", merged.maxLogBytes),
    maxToolCalls: merged.maxToolCalls === undefined ? MCP_RUN_LIMITS.maxToolCalls.default : clamp("maxToolCalls", merged.maxToolCalls),
  });
}

export function mcpRunLayerFromWire(c: WireMcpRun | undefined): McpRunLayer {
  const out: McpRunLayer = {};
  if (!c) return out;
  if (c.enabled !== undefined) out.enabled = c.enabled;
  if (c.maxLogBytes !== undefined) out.maxLogBytes = Number(c.maxLogBytes);
  if (c.maxToolCalls !== undefined) out.maxToolCalls = c.maxToolCalls;
  return out;
}

export function mcpRunToWire(c: McpRunConfig): { enabled: boolean; maxLogBytes: bigint; maxToolCalls: number } {
  return { enabled: c.enabled, maxLogBytes: BigInt(c.maxLogBytes), maxToolCalls: c.maxToolCalls };
}

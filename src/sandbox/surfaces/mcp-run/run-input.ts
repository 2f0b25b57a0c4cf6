/**
 * The `codemode.run` request (spec 3.2): `code` (required string), `limits` (optional
 * object; the four supported keys are clamped to the host's maximum, unknown keys are
 * ignored without error), `requestedCapabilities` (optional array of strings). A request
 * that breaks these rules is still answered with a structured response (an
 * INVALID_REQUEST diagnostic), never a transport error. Adjusted limits are reported as
 * `info` diagnostics so the agent knows what applied.
 */
import type { CodeModeConfig } from "../../../shared/config.js";
import type { McpRunConfig } from "../../../shared/mcp-run/config.js";
import type { Diagnostic } from "./diagnostic.js";

/** Largest script accepted, in UTF-8 bytes (as code mode's exec). */
export const MAX_SCRIPT_BYTES = 1_048_576;
const MIN = { timeoutMs: 100, maxMemoryBytes: 4 * 1024 * 1024, maxLogBytes: 0, maxToolCalls: 0 } as const;

export type RunLimits = { timeoutMs: number; maxMemoryBytes: number; maxLogBytes: number; maxToolCalls: number };
export type RunInput = { code: string; requested: Record<string, unknown>; capabilities: string[] };

function invalid(message: string, hint: string): { ok: false; diagnostic: Diagnostic } {
  return { ok: false, diagnostic: { severity: "error", code: "INVALID_REQUEST", message, hint } };
}

/** Reads the request from the Exec's `input_json`, or takes `code` alone when it is unset. */
export function parseRunInput(inputJson: string | undefined, code: string | undefined): { ok: true; input: RunInput } | { ok: false; diagnostic: Diagnostic } {
  let raw: unknown = { code: code ?? "" };
  if (inputJson !== undefined) {
    try {
      raw = JSON.parse(inputJson) as unknown;
    } catch {
      return invalid("the codemode.run arguments are not valid JSON.", 'Send a JSON object such as {"code": "..."}.');
    }
  }
  if (raw === null || typeof raw !== "object" || Array.isArray(raw))
    return invalid("the codemode.run request must be a JSON object.", 'Send {"code": "...", "limits"?: {...}, "requestedCapabilities"?: [...]}.');
  const r = raw as Record<string, unknown>;
  if (typeof r.code !== "string")
    return invalid(`code must be a string, got ${r.code === undefined ? "nothing" : typeof r.code}.`, "Put the JavaScript module source in `code`.");
  if (r.code.trim() === "") return invalid("code is empty.", "Put the JavaScript module source in `code`.");
  if (Buffer.byteLength(r.code, "utf8") > MAX_SCRIPT_BYTES)
    return invalid(`code is larger than ${MAX_SCRIPT_BYTES} bytes.`, "Send a shorter script: do the work with loops over tool calls, not inlined data.");
  if (r.limits !== undefined && (r.limits === null || typeof r.limits !== "object" || Array.isArray(r.limits)))
    return invalid("limits must be an object.", "Send limits as {timeoutMs?, maxMemoryBytes?, maxLogBytes?, maxToolCalls?}, or leave it out.");
  const caps = r.requestedCapabilities;
  if (caps !== undefined && (!Array.isArray(caps) || caps.some((c) => typeof c !== "string")))
    return invalid("requestedCapabilities must be an array of strings.", 'Send server ids, e.g. ["github"], or leave it out.');
  return {
    ok: true,
    input: {
      code: r.code,
      requested: (r.limits as Record<string, unknown> | undefined) ?? {},
      capabilities: ((caps as string[] | undefined) ?? []).slice(0, 100),
    },
  };
}

/** The limits that apply: each requested value clamped between its minimum and the host's maximum (also the default). */
export function effectiveLimits(requested: Record<string, unknown>, config: CodeModeConfig, mcpRun: McpRunConfig): { limits: RunLimits; notes: Diagnostic[] } {
  const max: RunLimits = {
    timeoutMs: config.timeoutMs,
    maxMemoryBytes: config.memoryLimitBytes,
    maxLogBytes: mcpRun.maxLogBytes,
    maxToolCalls: mcpRun.maxToolCalls,
  };
  const limits: RunLimits = { ...max };
  const notes: Diagnostic[] = [];
  for (const key of Object.keys(max) as Array<keyof RunLimits>) {
    if (!Object.hasOwn(requested, key)) continue;
    const v = requested[key];
    if (typeof v !== "number" || !Number.isFinite(v)) {
      notes.push({
        severity: "warning",
        code: "LIMIT_ADJUSTED",
        message: `limits.${key} must be an integer; ${max[key]} (the default) applies.`,
        path: `/limits/${key}`,
      });
      continue;
    }
    const n = Math.trunc(v);
    const applied = Math.min(max[key], Math.max(MIN[key], n));
    limits[key] = applied;
    if (applied !== n) {
      notes.push({
        severity: "info",
        code: "LIMIT_ADJUSTED",
        message: `limits.${key} ${n} is ${n > applied ? `above this host's maximum` : "below the minimum"}; ${applied} applies.`,
        path: `/limits/${key}`,
      });
    }
  }
  return { limits, notes };
}

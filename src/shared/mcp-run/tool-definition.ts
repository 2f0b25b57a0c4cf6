/**
 * The one model-visible tool of the Code Mode for MCP surface, `codemode.run`: its input
 * and output schemas, and the description that is the agent's documentation block (what
 * the spec says a host MUST put in its system prompt: language restrictions, globals and
 * their deviations, limit keys, capability ids, the unwrapping rules, concurrency) followed
 * by the TypeScript declarations of every module the script can import (spec 4.4). The
 * orchestrator serves it from DescribeSurface; the MCP front lists it as its only tool.
 */
import { renderDeclarations } from "./declarations.js";
import { SPEC_VERSION, type McpRunServer } from "./naming.js";

export const RUN_TOOL_NAME = "codemode.run";

/** Limits a host applies, shown to the agent: each is the default and the maximum. */
export type RunToolLimits = { timeoutMs: number; maxMemoryBytes: number; maxLogBytes: number; maxToolCalls: number; maxConcurrentCalls: number };

export const RUN_INPUT_SCHEMA = {
  type: "object",
  properties: {
    code: { type: "string", description: "JavaScript source, evaluated as an ES module (import/export, top-level await)." },
    limits: {
      type: "object",
      description: "Optional execution limits, each at most the host's maximum; unknown keys are ignored.",
      properties: {
        timeoutMs: { type: "integer", minimum: 1 },
        maxMemoryBytes: { type: "integer", minimum: 1 },
        maxLogBytes: { type: "integer", minimum: 0 },
        maxToolCalls: { type: "integer", minimum: 0 },
      },
    },
    requestedCapabilities: { type: "array", items: { type: "string" }, description: "Server ids the script means to use (lazy-connection hints)." },
  },
  required: ["code"],
} as const;

const LOG = {
  type: "object",
  properties: { level: { enum: ["debug", "log", "warn", "error"] }, message: { type: "string" }, timeMs: { type: "integer" } },
  required: ["level", "message", "timeMs"],
};
const DIAGNOSTIC = {
  type: "object",
  properties: {
    severity: { enum: ["error", "warning", "info"] },
    code: { type: "string" },
    message: { type: "string" },
    hint: { type: "string" },
    path: { type: "string" },
    errorClass: { type: "string" },
  },
  required: ["severity", "code", "message"],
};
const TRACE = {
  type: "object",
  properties: {
    serverId: { type: "string" },
    toolName: { type: "string" },
    durationMs: { type: "integer" },
    ok: { type: "boolean" },
    error: { type: "string" },
  },
  required: ["serverId", "toolName", "durationMs", "ok"],
};

/** The response (spec 3.3), for MCP clients that read `structuredContent`. */
export const RUN_OUTPUT_SCHEMA = {
  type: "object",
  properties: {
    logs: { type: "array", items: LOG },
    result: {},
    diagnostics: { type: "array", items: DIAGNOSTIC },
    toolTrace: { type: "array", items: TRACE },
  },
  required: ["logs", "result", "diagnostics"],
} as const;

function serverLines(servers: readonly McpRunServer[]): string[] {
  if (servers.length === 0) return ["- (no MCP server is connected now)"];
  return servers.map((s) => `- ${s.serverId} (@codemode/servers/${s.serverId}): ${s.serverName}, ${s.tools.length} tool${s.tools.length === 1 ? "" : "s"}`);
}

/** The documentation block plus declarations. */
export function runToolDescription(servers: readonly McpRunServer[], limits: RunToolLimits): string {
  return [
    "Run a JavaScript program in a fresh, isolated sandbox that calls the MCP servers below as typed async functions. Write code that does the whole task (loops, joins, filtering, Promise.all) and returns a small summary.",
    "",
    'LANGUAGE. `code` is an ES module: `import`/`export` and top-level `await` work, in strict mode. Only the built-in modules can be imported: `@codemode/discovery`, `@codemode/errors` and `@codemode/servers/<serverId>`, statically or with `await import("@codemode/servers/<serverId>")`; any other import is an IMPORT_FAILURE diagnostic. `export` declarations run but nothing reads them. No eval, no `new Function(string)`, no `import.meta`, no `require`; `Error.prepareStackTrace` cannot be set.',
    "",
    "RESULT. Set `globalThis.__codemode_result__ = value` (a JSON value) to return it; the response's `result` is its final value when the script and everything it started (tool calls, timers) has finished, or null.",
    "",
    "RESPONSE. A JSON object: `logs` [{level: debug|log|warn|error, message, timeMs}], `result`, `diagnostics` [{severity, code, message, hint?, path?, errorClass?}] (codes: SYNTAX_ERROR, IMPORT_FAILURE, UNCAUGHT_EXCEPTION, SANDBOX_LIMIT, UNSETTLED_AWAIT, INVALID_REQUEST, CAPABILITY_UNAVAILABLE, LIMIT_ADJUSTED, RUNTIME_UNAVAILABLE, INTERNAL_ERROR), and `toolTrace` [{serverId, toolName, durationMs, ok, error?}] (no inputs or outputs). A failing script still gets a response: read its diagnostics, fix, run again. Nothing survives between runs.",
    "",
    "GLOBALS. JSON, Math, Date (UTC), URL, URLSearchParams, Promise, Map, Set, WeakMap, WeakSet, Symbol, Proxy, Reflect, RegExp, Error, Array, Object, String, Number, Boolean, BigInt, parseInt, parseFloat, isNaN, isFinite, TextEncoder, TextDecoder, typed arrays, ArrayBuffer, DataView, setTimeout, clearTimeout, console.log/debug/warn/error. Additions (deviations): atob, btoa, structuredClone, queueMicrotask, console.info (level log). Not available: fetch or any network API, setInterval, eval, process, require.",
    "",
    'CONSOLE. Arguments are joined with spaces: primitives as String(value), objects and arrays as JSON with sorted keys (Errors as {name, message, ...}; unserializable values as "[Unserializable Object]"). Aggregate and filter before logging: print counts, top-N and summaries, not whole datasets. Logs past maxLogBytes are dropped and a final warn entry says so.',
    "",
    `LIMITS (request \`limits\`; each value is the default and the maximum; unknown keys are ignored): timeoutMs ${limits.timeoutMs}, maxMemoryBytes ${limits.maxMemoryBytes}, maxLogBytes ${limits.maxLogBytes}, maxToolCalls ${limits.maxToolCalls}. Exceeding timeoutMs or maxMemoryBytes ends the script, whatever it catches (diagnostic SANDBOX_LIMIT, errorClass SandboxLimitError, with the logs from before); the call past maxToolCalls throws SandboxLimitError.`,
    "",
    'CAPABILITIES (`requestedCapabilities`): server ids as listed below, or module specifiers "@codemode/servers/<serverId>". A requested server that is not connected is reported at once as a CAPABILITY_UNAVAILABLE warning, and importing it fails with ServerNotFoundError.',
    "",
    'CALLS. `import * as s from "@codemode/servers/<serverId>"`; `await s.<exportName>(input)`. Export names: the MCP tool name with characters illegal in identifiers replaced by `_`, `_` before a leading digit, `_` after a reserved word, `__2`, `__3` for names that still collide (tools in name order); `__meta__` lists them. A tool with an object input schema takes one object; one with an empty schema takes nothing or `{}`; a non-object root type takes one value of that type. Input is validated against the schema before the call (SchemaValidationError with a JSON Pointer `path`, expected/received and an example).',
    "UNWRAPPING. A call returns, in this order: 1) the result's `structuredContent` if present (content ignored); 2) the text of a single text content block; 3) the whole MCP result when it has image or audio blocks (binary data as base64 strings); 4) otherwise the whole MCP result. A result with isError throws ToolCallError (the result in `error.result`).",
    "",
    `CONCURRENCY. Calls may run concurrently (\`await Promise.all([a.x(), b.y()])\`), at most ${limits.maxConcurrentCalls} in flight; more wait their turn. One failing call throws only where it is awaited.`,
    "",
    `DISCOVERY (\`@codemode/discovery\`, specVersion "${SPEC_VERSION}"): listServers(), describeServer(serverId), listTools(serverId, {detail}), getTool(serverId, toolName), searchTools(query, {detail, serverId, limit}); detail is "name" | "description" (default) | "full" (adds inputSchema and outputSchema).`,
    "ERRORS (`@codemode/errors`): CodemodeError (base; every error has `hint`), SchemaValidationError, ToolNotFoundError, ServerNotFoundError, ToolCallError, AuthenticationError, SandboxLimitError.",
    "",
    "SERVERS:",
    ...serverLines(servers),
    "",
    "DECLARATIONS:",
    "```ts",
    renderDeclarations(servers).trimEnd(),
    "```",
  ].join("\n");
}

export type RunToolDefinition = { name: string; description: string; inputSchema: Record<string, unknown>; outputSchema: Record<string, unknown> };

export function runToolDefinition(servers: readonly McpRunServer[], limits: RunToolLimits): RunToolDefinition {
  return {
    name: RUN_TOOL_NAME,
    description: runToolDescription(servers, limits),
    inputSchema: RUN_INPUT_SCHEMA as unknown as Record<string, unknown>,
    outputSchema: RUN_OUTPUT_SCHEMA as unknown as Record<string, unknown>,
  };
}

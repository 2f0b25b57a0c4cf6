/**
 * The `codemode.run` response (spec 3.3): `logs`, `result`, `diagnostics` and the
 * redacted `toolTrace`, built from what the prelude reported as tagged output items and
 * how the segment ended. Every ending is a response: a syntax error, an import failure,
 * an uncaught exception or a limit gives `result: null` and at least one error
 * diagnostic, with the logs and finished tool calls from before the failure. Positions
 * in the rewritten script are one line lower than the agent's (./module-transform.ts);
 * they are mapped back here.
 */
import type { TaskOutcome } from "../../pool/task-protocol.js";
import type { Diagnostic } from "./diagnostic.js";
import { PROLOGUE_LINES } from "./module-transform.js";

export type LogEntry = { level: "debug" | "log" | "warn" | "error"; message: string; timeMs: number };
export type TraceEntry = { serverId: string; toolName: string; durationMs: number; ok: boolean; error?: string };
export type RunResponse = { logs: LogEntry[]; result: unknown; diagnostics: Diagnostic[]; toolTrace: TraceEntry[] };

/** What the prelude reported during the run, in order. */
export class RunReport {
  readonly logs: LogEntry[] = [];
  readonly trace: TraceEntry[] = [];
  readonly diagnostics: Diagnostic[] = [];
  truncated = false;
  uncaught: { errorClass: string; hint?: string; path?: string } | undefined;

  /** Takes one output item; returns the spec log entry to stream to the gateway, if it is one. */
  add(kind: "text" | "json", data: string): LogEntry | undefined {
    if (kind !== "json") return undefined;
    let item: Record<string, unknown>;
    try {
      item = JSON.parse(data) as Record<string, unknown>;
    } catch {
      return undefined;
    }
    const str = (v: unknown) => (typeof v === "string" ? v : undefined);
    switch (item.k) {
      case "log": {
        const entry: LogEntry = { level: item.level as LogEntry["level"], message: String(item.message), timeMs: Number(item.timeMs) };
        this.logs.push(entry);
        return entry;
      }
      case "trace": {
        const t: TraceEntry = { serverId: String(item.serverId), toolName: String(item.toolName), durationMs: Number(item.durationMs), ok: item.ok === true };
        if (!t.ok && str(item.error)) t.error = str(item.error)!;
        this.trace.push(t);
        return undefined;
      }
      case "diag":
        this.diagnostics.push(diag(item));
        return undefined;
      case "uncaught":
        this.uncaught = {
          errorClass: String(item.errorClass),
          ...(str(item.hint) ? { hint: str(item.hint)! } : {}),
          ...(str(item.path) ? { path: str(item.path)! } : {}),
        };
        return undefined;
      case "trunc":
        this.truncated = true;
        return undefined;
      default:
        return undefined;
    }
  }
}

function diag(item: Record<string, unknown>): Diagnostic {
  const d: Diagnostic = { severity: (item.severity as Diagnostic["severity"]) ?? "error", code: String(item.code), message: String(item.message) };
  for (const k of ["hint", "path", "errorClass"] as const) if (typeof item[k] === "string") d[k] = item[k];
  return d;
}

/** `(line L, column C)` of the rewritten script, moved back to the agent's lines. */
function mapPosition(message: string): { message: string; path?: string } {
  const m = /\(line (\d+), column (\d+)\)\.?$/.exec(message);
  if (!m) return { message };
  const line = Number(m[1]) - PROLOGUE_LINES;
  if (line < 1) return { message: message.slice(0, m.index).trimEnd() };
  return { message: `${message.slice(0, m.index)}(line ${line}, column ${m[2]})`, path: `${line}:${m[2]}` };
}

/** The diagnostic of a segment that did not complete. */
export function failureDiagnostic(
  outcome: Exclude<TaskOutcome, { status: "completed" }>,
  report: RunReport,
  limits: { timeoutMs: number; maxMemoryBytes: number },
): Diagnostic {
  if (outcome.status === "suspended") {
    const pending = outcome.pending.filter((p) => p.kind === "call").length;
    return {
      severity: "error",
      code: "SANDBOX_LIMIT",
      errorClass: "SandboxLimitError",
      message: `the script exceeded timeoutMs (${limits.timeoutMs} ms) while waiting${pending > 0 ? ` on ${pending} tool call${pending === 1 ? "" : "s"}` : ""}; it was stopped.`,
      hint: "Make fewer or faster calls per run, or raise limits.timeoutMs within the host's maximum.",
    };
  }
  const { message, path } = mapPosition(outcome.error.replace(/ Use tools\.search\/tools\.call instead\.$/, ""));
  const at = path ? { path } : {};
  switch (outcome.code) {
    case "timeout":
      return {
        severity: "error",
        code: "SANDBOX_LIMIT",
        errorClass: "SandboxLimitError",
        message: `the script exceeded timeoutMs (${limits.timeoutMs} ms) and was stopped.`,
        hint: "Do less work per run (no unbounded loops), or raise limits.timeoutMs within the host's maximum.",
      };
    case "output_limit_exceeded":
      return {
        severity: "error",
        code: "SANDBOX_LIMIT",
        errorClass: "SandboxLimitError",
        message: `the script's result is too large: ${message}`,
        hint: "Return a smaller summary in __codemode_result__.",
      };
    case "invalid_input":
      if (/rejects module access/.test(message)) {
        return {
          severity: "error",
          code: "IMPORT_FAILURE",
          message: message.replace(/^exec rejects/, "codemode.run rejects").replace(" in code mode ", " in codemode.run "),
          hint: "Only the built-in @codemode/* modules can be imported; there is no require or module loader.",
          ...at,
        };
      }
      if (/^SyntaxError/.test(message)) return { severity: "error", code: "SYNTAX_ERROR", message, hint: "Fix the syntax at the reported position.", ...at };
      return { severity: "error", code: "INVALID_REQUEST", message, ...at };
    case "runtime_unavailable":
      return { severity: "error", code: "RUNTIME_UNAVAILABLE", message, hint: "Retry the run; the sandbox could not start." };
    case "internal_error":
      return { severity: "error", code: "INTERNAL_ERROR", message, hint: "Retry the run." };
    default:
      break;
  }
  if (/awaiting a promise that can never settle/.test(message)) {
    return {
      severity: "error",
      code: "UNSETTLED_AWAIT",
      message: "the script awaits a promise that can never settle (no tool call or timer is pending).",
      hint: "Await only promises that settle: tool calls, timers, or promises you resolve.",
    };
  }
  if (/out of memory/i.test(message)) {
    return {
      severity: "error",
      code: "SANDBOX_LIMIT",
      errorClass: "SandboxLimitError",
      message: `the script exceeded maxMemoryBytes (${limits.maxMemoryBytes} bytes) and was stopped: ${message}`,
      hint: "Keep less data in memory (stream, filter, aggregate), or raise limits.maxMemoryBytes within the host's maximum.",
      ...at,
    };
  }
  const u = report.uncaught;
  const limit = u?.errorClass === "SandboxLimitError";
  const d: Diagnostic = { severity: "error", code: limit ? "SANDBOX_LIMIT" : "UNCAUGHT_EXCEPTION", message: `Uncaught ${message}` };
  if (u?.hint) d.hint = u.hint;
  else d.hint = "Catch the error, or fix its cause; the message says where it was thrown.";
  if (u?.path !== undefined) d.path = u.path;
  else if (path) d.path = path;
  if (u) d.errorClass = u.errorClass;
  return d;
}

/** The response: every field present, `result` null unless the run completed. */
export function buildResponse(
  report: RunReport,
  pre: readonly Diagnostic[],
  end: { result: unknown } | { failure: Diagnostic },
  maxLogBytes: number,
): RunResponse {
  const logs = [...report.logs];
  if (report.truncated) {
    logs.push({
      level: "warn",
      message: `logs truncated: the console output passed maxLogBytes (${maxLogBytes} bytes); later entries were dropped.`,
      timeMs: logs.length > 0 ? logs[logs.length - 1]!.timeMs : 0,
    });
  }
  const diagnostics = [...pre, ...report.diagnostics];
  if ("failure" in end) diagnostics.push(end.failure);
  return { logs, result: "failure" in end ? null : end.result, diagnostics, toolTrace: report.trace };
}

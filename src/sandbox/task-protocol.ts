/**
 * Messages between the sidecar's main thread and a pool worker running one exec.
 * A discriminated union each way, plain data only; errors cross as {name, message}.
 * The task's own MessagePort carries them so output and tool calls stream in order,
 * and the final outcome travels last on the same port.
 */
import type { MessagePort } from "node:worker_threads";
import type { Language } from "../shared/config.js";

export type ErrorCodeName =
  | "invalid_input"
  | "runtime_unavailable"
  | "timeout"
  | "output_limit_exceeded"
  | "snapshot_limit_exceeded"
  | "internal_error";

export type TaskLimits = {
  timeoutMs: number;
  memoryLimitBytes: number;
  maxOutputBytes: number;
  maxPendingToolCalls: number;
  maxSnapshotBytes: number;
};

/** The compact catalog a VM starts with. */
export type GuestCatalog = {
  /** JSON array of ALL_TOOLS entries. */
  allToolsJson: string;
  /** [safeName, catalogId] pairs installed as tools.<safeName>. */
  convenience: Array<[string, string]>;
  /** Ids the guest may call (non-MCP, policy-visible). */
  callableIds: string[];
};

export type ExecTask = {
  kind: "exec";
  port: MessagePort;
  source: string;
  language: Language;
  limits: TaskLimits;
  catalog: GuestCatalog;
  /** Output bytes already used by earlier segments of this run. */
  outputBytesUsed: number;
};

export type PlainError = { name: string; message: string };

/** Worker → main. */
export type WorkerMessage =
  | { t: "started"; threadId: number }
  | { t: "output"; kind: "text" | "json"; data: string }
  | { t: "call"; callId: string; toolId: string; inputJson: string }
  | { t: "request"; reqId: string; op: "search" | "describe" | "api_list" | "api_read"; payloadJson: string }
  | { t: "yield"; callId: string; reason: string }
  | { t: "done"; outcome: TaskOutcome };

/** Main → worker. */
export type MainMessage =
  | { t: "answer"; callId: string; ok: true; json: string }
  | { t: "answer"; callId: string; ok: false; error: PlainError }
  | { t: "cancel"; reason: string };

export type TaskCounters = { search: number; describe: number; call: number };

export type TaskOutcome =
  | { status: "completed"; valueJson: string; outputBytes: number; counters: TaskCounters }
  | { status: "failed"; error: string; code?: ErrorCodeName; outputBytes: number; counters: TaskCounters };

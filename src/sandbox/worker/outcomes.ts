/**
 * How a VM session's outcome is made: a failure, the completed value checked against the
 * output budget and the JSON bridge, and the small constants and helpers the session
 * shares with its starters (./sessions.ts). Split from ./vm-session.ts, which keeps the
 * session's state and drain loop.
 */
import { JSException } from "quickjs-wasi";
import type { ErrorCodeName, PendingRef, SuspendReason, TaskOutcome } from "../pool/task-protocol.js";
import { ENCODING_DELTA, type encodeSnapshot } from "./snapshot-codec.js";
import { guestErrorMessage } from "./guest-errors.js";
import { parseBridgeJson } from "./json-bridge.js";

/** What the program settled to: its value's JSON, or its error's. */
export type Settled = { ok: true; valueJson: string } | { ok: false; errorJson: string };

/** Time the host allows for snapshotting and encoding an idle VM (up to 1 GiB of memory). */
export const SNAPSHOT_BUDGET_MS = 30_000;

/**
 * Each output item is charged this much on top of its text, so empty items cannot
 * grow a result without bound (the wire and model forms wrap every item).
 */
export const OUTPUT_ITEM_OVERHEAD_BYTES = 32;

/** An error keeps at least this much of its text, even when output used the whole budget. */
export const MIN_ERROR_BYTES = 1_024;
/**
 * And at most this much, whatever the budget: a Result carries the error twice (`error` and
 * `model_json`), and with the rest of the Result it must fit a gRPC client's default
 * receive limit.
 */
export const MAX_ERROR_BYTES = 1_048_576;

/**
 * An error's text within what is left of the output budget (at least MIN_ERROR_BYTES, at
 * most MAX_ERROR_BYTES), cut on a character boundary and marked, as the guest's name,
 * message and stack are guest-sized. Every outcome a session hands back passes here
 * (./vm-session.ts `run`).
 */
export function boundedError(error: string, budgetBytes: number): string {
  const cap = Math.min(MAX_ERROR_BYTES, Math.max(MIN_ERROR_BYTES, budgetBytes));
  // Cheap test first: UTF-8 takes at most 3 bytes per UTF-16 unit.
  if (error.length * 3 <= cap) return error;
  const bytes = Buffer.byteLength(error, "utf8");
  if (bytes <= cap) return error;
  const marker = ` … [error truncated: ${bytes} bytes, the output budget leaves ${cap}]`;
  let head = Buffer.from(error.slice(0, cap), "utf8")
    .subarray(0, Math.max(0, cap - Buffer.byteLength(marker, "utf8")))
    .toString("utf8");
  if (head.endsWith("\uFFFD")) head = head.slice(0, -1);
  return head + marker;
}

export function failed(error: string, outputBytes: number, code?: ErrorCodeName): TaskOutcome {
  return code ? { status: "failed", error, code, outputBytes } : { status: "failed", error, outputBytes };
}

/** The outcome of a settled program: its value within the output budget and JSON-compatible, or its error placed in the source. */
export function completion(settled: Settled, outputBytes: number, maxOutputBytes: number, source: string): TaskOutcome {
  if (!settled.ok) return failed(guestErrorMessage(settled.errorJson, source), outputBytes);
  const valueBytes = Buffer.byteLength(settled.valueJson, "utf8");
  if (outputBytes + valueBytes > maxOutputBytes) {
    return failed(`code mode result exceeded maxOutputBytes (${maxOutputBytes} bytes).`, outputBytes, "output_limit_exceeded");
  }
  try {
    parseBridgeJson(settled.valueJson, "result value");
  } catch (err) {
    return failed(`code mode result is not JSON-compatible: ${(err as Error).message}`, outputBytes);
  }
  return { status: "completed", valueJson: settled.valueJson, outputBytes: outputBytes + valueBytes };
}

/** WebAssembly.RuntimeError (a trap), which the project's WebAssembly typings leave out. */
export function wasmRuntimeError(): new (...a: unknown[]) => Error {
  return (globalThis as unknown as { WebAssembly: { RuntimeError: new (...a: unknown[]) => Error } }).WebAssembly.RuntimeError;
}

/** The outcome of what the VM threw (no fatal error, cancel or deadline behind it): the guest's uncaught error, a trap, or a host failure. */
export function thrownOutcome(err: unknown, outputBytes: number): TaskOutcome {
  if (err instanceof JSException) {
    const msg = `${err.name}: ${err.message}`.replace(/^Error: Job execution error: /, "");
    err.dispose();
    return failed(msg, outputBytes);
  }
  if (err instanceof wasmRuntimeError()) return failed(`RuntimeError: the guest VM crashed (${(err as Error).message}) and was discarded.`, outputBytes);
  return failed(`internal: ${(err as Error)?.message ?? String(err)}`, outputBytes, "internal_error");
}

/** A suspended segment's outcome: the encoded snapshot and what the VM still awaits. */
export function suspendedOutcome(
  reason: SuspendReason,
  encoded: ReturnType<typeof encodeSnapshot>,
  pending: PendingRef[],
  outputBytes: number,
  t0: number,
): TaskOutcome {
  return {
    status: "suspended",
    reason,
    envelope: encoded.envelope,
    pending,
    outputBytes,
    snapshot: {
      encoding: encoded.encoding === ENCODING_DELTA ? "delta" : "plain",
      memoryBytes: encoded.memoryBytes,
      changedPages: encoded.changedPages,
      encodeMs: performance.now() - t0,
    },
  };
}

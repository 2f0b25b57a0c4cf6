/**
 * How a VM session's outcome is made: a failure, the completed value checked against the
 * output budget and the JSON bridge, and the small constants and helpers the session
 * shares with its starters (./sessions.ts). Split from ./vm-session.ts, which keeps the
 * session's state and drain loop.
 */
import { JSException } from "quickjs-wasi";
import type { ErrorCodeName, PendingRef, TaskOutcome } from "../pool/task-protocol.js";
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
  reason: "pending_tools" | "yield",
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

/**
 * Errors as the guest and the model see them: host errors enter the VM as plain
 * {name, message} with no host stack, and a guest's uncaught error leaves as one line
 * with its position in the model's own source.
 */
import { CELL_FILENAME, CELL_PREFIX } from "../guest/prelude.js";
import type { PlainError } from "../task-protocol.js";
import { BridgeValueError } from "./json-bridge.js";

/** An error for the guest: name and message only, no host stack. */
export function guestError(name: string, message: string): Error {
  const e = new Error(message);
  e.name = name;
  e.stack = "";
  return e;
}

/** Any host-side failure, reduced to what the guest may see. */
export function plainForGuest(err: unknown): Error {
  if (err instanceof Error && err.stack === "") return err;
  if (err instanceof BridgeValueError) return guestError("TypeError", err.message);
  const e = err as Partial<PlainError>;
  return guestError(typeof e?.name === "string" ? e.name : "Error", typeof e?.message === "string" ? e.message : "host error");
}

export function formatLocation(line: number, column: number): string {
  return `line ${line}, column ${column}`;
}

/** Maps a position in the wrapped cell back to the model's source. */
export function cellPosition(line: number, column: number): { line: number; column: number } {
  return line === 1 ? { line, column: Math.max(1, column - CELL_PREFIX.length) } : { line, column };
}

/** The model-facing message of an uncaught guest error (JSON from the prelude). */
export function guestErrorMessage(errorJson: string): string {
  let data: { name?: unknown; message?: unknown; stack?: unknown };
  try {
    data = JSON.parse(errorJson) as typeof data;
  } catch {
    return "Error: uncaught exception";
  }
  const name = typeof data.name === "string" && data.name ? data.name : "Error";
  const message = typeof data.message === "string" ? data.message : "";
  const stack = typeof data.stack === "string" ? data.stack : "";
  const m = new RegExp(`${CELL_FILENAME}:(\\d+):(\\d+)`).exec(stack);
  // QuickJS records no position for a few operations (a property read on a literal
  // `null`): the frame then points at the cell wrapper itself, which is no place in the
  // model's code, so no position is claimed rather than a wrong one.
  if (!m || (m[1] === "1" && Number(m[2]) <= CELL_PREFIX.length)) return message ? `${name}: ${message}` : name;
  const pos = cellPosition(Number(m[1]), Number(m[2]));
  return `${message ? `${name}: ${message}` : name} (${formatLocation(pos.line, pos.column)})`;
}

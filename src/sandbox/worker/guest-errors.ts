/**
 * Errors as the guest and the model see them: host errors enter the VM as plain
 * {name, message} with no host stack, and a guest's uncaught error leaves as one line
 * with its position in the model's own source.
 */
import { JSValueHandle, QuickJS } from "quickjs-wasi";
import { CELL_FILENAME, CELL_PREFIX } from "../guest/bridge-names.js";
import type { PlainError } from "../pool/task-protocol.js";
import { BridgeValueError } from "./json-bridge.js";

/** An error for the guest: name and message only, no host stack. */
export function guestError(name: string, message: string): Error {
  const e = new Error(message);
  e.name = name;
  e.stack = "";
  return e;
}

/**
 * How an error a host callback throws enters the VM: quickjs-wasi's own `newError` assigns
 * `message` and `name` as a program would (`err.message = ...`), so a setter the guest put on
 * Error.prototype or Object.prototype ran with the host's text and the error arrived without
 * it. This one defines them as the error's own properties (no setter runs) and never copies a
 * host stack. Installed once per worker thread, for every instance (made, reset or restored).
 */
export function defineHostErrors(): void {
  QuickJS.prototype.newError = function newError(this: QuickJS, messageOrError: string | Error): JSValueHandle {
    const err = new JSValueHandle(this, this._getExports().qjs_new_error());
    const own = (key: string, text: string) => {
      const value = this.newString(text);
      try {
        this.defineProp(err, key, value, { writable: true, configurable: true });
      } finally {
        value.dispose();
      }
    };
    try {
      own("message", typeof messageOrError === "string" ? messageOrError : String(messageOrError.message));
      if (typeof messageOrError !== "string" && messageOrError.name) own("name", String(messageOrError.name));
    } catch (e) {
      err.dispose();
      throw e;
    }
    return err;
  };
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

const escapeRe = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/** Keywords after which `(` opens a parenthesized expression, not a call's arguments. */
const BEFORE_PAREN_EXPR = new Set(["return", "typeof", "void", "await", "throw", "case", "in", "of", "delete", "else", "do", "yield", "new", "instanceof"]);

/**
 * How many `(` wrap the expression starting at `index` (at most `max`): each must open a
 * parenthesized expression, so the last one must not follow a name, `)` or `]` (a call),
 * unless that name is a keyword like `return`.
 */
function wrappingParens(source: string, index: number, max: number): number {
  let i = index - 1;
  let n = 0;
  while (n < max) {
    while (i >= 0 && /\s/.test(source[i]!)) i--;
    if (source[i] !== "(") break;
    n++;
    i--;
  }
  while (i >= 0 && /\s/.test(source[i]!)) i--;
  if (i >= 0 && /[)\]]/.test(source[i]!)) return -1;
  if (i >= 0 && /[\w$]/.test(source[i]!)) {
    let j = i;
    while (j >= 0 && /[\w$]/.test(source[j]!)) j--;
    if (!BEFORE_PAREN_EXPR.has(source.slice(j + 1, i + 1))) return n === 0 ? 0 : -1;
  }
  return n;
}

/**
 * Where in the model's source a property access on a literal `null`/`undefined` is, for
 * the errors QuickJS records no position for: only when the source has exactly one such
 * access to that property, so the answer is never a guess between two places. The literal
 * may be parenthesized, as TypeScript's casts leave it (`(null as any).y` runs as
 * `(null       ).y`); the position is the literal's, as QuickJS gives `(o).y` the `o`.
 */
function literalAccessPosition(message: string, source: string): { line: number; column: number } | undefined {
  const m = /^cannot (?:read|set) property '([^']{1,100})' of (null|undefined)$/.exec(message);
  if (!m) return undefined;
  const prop = escapeRe(m[1]!);
  const re = new RegExp(`\\b${m[2]}\\b((?:\\s*\\))*)\\s*(?:(?:\\?\\.|\\.)\\s*${prop}\\b|\\[\\s*["']${prop}["']\\s*\\])`, "g");
  const text = source.slice(0, 1_000_000);
  const hits = [...text.matchAll(re)].filter((hit) => {
    const closes = (hit[1]!.match(/\)/g) ?? []).length;
    const before = text.slice(0, hit.index).trimEnd();
    if (closes === 0) return !before.endsWith(".") && !before.endsWith("?.");
    return wrappingParens(text, hit.index, closes) === closes;
  });
  if (hits.length !== 1) return undefined;
  const before = text.slice(0, hits[0]!.index);
  const line = before.split("\n").length;
  return { line, column: before.length - before.lastIndexOf("\n") };
}

/**
 * True when the source at line:column starts an access of `prop` (`o.prop`, `o?.prop`,
 * `a.b().prop`...), also inside parentheses that open right before it (`(o).prop`, what
 * TypeScript's `(o as T).prop` runs as).
 */
function accessAt(source: string, line: number, column: number, prop: string): boolean {
  const lines = source.split("\n");
  const text = lines[line - 1];
  if (text === undefined) return false;
  const rest = text.slice(column - 1);
  const escaped = escapeRe(prop);
  // An identifier, then a chain of member accesses, calls, indexes and closing parentheses, ending in .prop or ["prop"].
  const chain = String.raw`^[A-Za-z_$][\w$]*\s*(?:(?:\?\.|\.)\s*[A-Za-z_$][\w$]*\s*|\[[^\]]*\]\s*|\([^)]*\)\s*|\)\s*)*?`;
  const found = new RegExp(`${chain}(?:(?:\\?\\.|\\.)\\s*${escaped}\\b|\\[\\s*["']${escaped}["']\\s*\\])`).exec(rest);
  if (!found) return false;
  const closes = (found[0].match(/\)/g) ?? []).length - (found[0].match(/\(/g) ?? []).length;
  if (closes <= 0) return true;
  const offset = lines.slice(0, line - 1).reduce((n, l) => n + l.length + 1, 0) + column - 1;
  return wrappingParens(source, offset, closes) === closes;
}

/** The model-facing message of an uncaught guest error (JSON from the prelude). */
export function guestErrorMessage(errorJson: string, source = ""): string {
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
  if (!m || (m[1] === "1" && Number(m[2]) <= CELL_PREFIX.length)) {
    const text = message ? `${name}: ${message}` : name;
    const found = literalAccessPosition(message, source);
    return found ? `${text} (${formatLocation(found.line, found.column)})` : text;
  }
  const pos = cellPosition(Number(m[1]), Number(m[2]));
  const text = message ? `${name}: ${message}` : name;
  // For a property access on null/undefined QuickJS points at the object expression; when
  // the object is the literal `null` it records nothing and the position is a stale one.
  const access = /^cannot (?:read|set) property '([^']{1,100})' of (?:null|undefined)$/.exec(message);
  if (access && source && !accessAt(source, pos.line, pos.column, access[1]!)) {
    const found = literalAccessPosition(message, source);
    return found ? `${text} (${formatLocation(found.line, found.column)})` : text;
  }
  return `${text} (${formatLocation(pos.line, pos.column)})`;
}

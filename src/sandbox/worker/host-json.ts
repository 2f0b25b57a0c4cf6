/**
 * JSON bytes parsed straight into a guest value by QuickJS's own parser.
 *
 * The main thread posts a large answer's UTF-8 bytes (transferred, not copied); they are
 * written into the VM's memory once, and `JS_ParseJSON` parses them there, with no guest
 * string made of them. It is the function the guest's `JSON.parse` itself calls on
 * the same bytes, so the value is the one the guest would have made (same objects, same
 * prototypes, same handling of `__proto__` keys and of numbers); what the guest may have
 * done to its own `JSON.parse` plays no part.
 *
 * The runtime's stack guard applies (on the pool's threads, whose large stack lets it trip
 * first, a text nested too deep is a RangeError, not a trap), and so does its memory limit.
 * Any failure is reported as undefined, with the guest's pending exception cleared: the
 * caller then parses the text at settlement as any answer, and meets the same error there.
 */
import { JSValueHandle, type QuickJS } from "quickjs-wasi";

type ParseExports = {
  memory: WebAssembly.Memory;
  wasm_malloc(n: number): number;
  wasm_free(p: number): void;
  qjs_get_context_ptr(): number;
  qjs_is_exception(p: number): number;
  JS_ParseJSON(ctx: number, buf: number, len: number, filename: number): bigint;
};

/** The file name QuickJS gives a parse (it appears only in error messages nobody sees). */
const FILE_NAME = new TextEncoder().encode("<answer>\0");

function parseExports(vm: QuickJS): ParseExports | undefined {
  const e = vm._getExports() as unknown as Partial<ParseExports>;
  return typeof e.JS_ParseJSON === "function" &&
    typeof e.wasm_malloc === "function" &&
    typeof e.qjs_get_context_ptr === "function" &&
    typeof e.qjs_is_exception === "function" &&
    e.memory
    ? (e as ParseExports)
    : undefined;
}

/**
 * Parses UTF-8 JSON `bytes` in `vm`; the caller owns (and disposes) the handle. Undefined
 * when the text does not parse (syntax, depth, memory) or this quickjs-wasi cannot do it.
 */
export function parseJsonBytes(vm: QuickJS, bytes: Uint8Array): JSValueHandle | undefined {
  const e = parseExports(vm);
  if (!e) return undefined;
  // One block for the text, its terminating NUL (the parser reads it) and the file name;
  // the handle's cell is its own block, since it outlives the text.
  const cell = e.wasm_malloc(8);
  if (cell === 0) return undefined;
  const text = e.wasm_malloc(bytes.length + 1 + FILE_NAME.length);
  if (text === 0) {
    e.wasm_free(cell);
    return undefined;
  }
  const mem = new Uint8Array(e.memory.buffer);
  mem.set(bytes, text);
  mem[text + bytes.length] = 0;
  mem.set(FILE_NAME, text + bytes.length + 1);
  // A trap propagates as it is (nothing more is called in the instance): the session
  // discards an instance that threw anything but a guest exception.
  const raw = e.JS_ParseJSON(e.qjs_get_context_ptr(), text, bytes.length, text + bytes.length + 1);
  e.wasm_free(text);
  // The parse may have grown the memory: a fresh view.
  new DataView(e.memory.buffer).setBigUint64(cell, BigInt.asUintN(64, raw), true);
  const handle = new JSValueHandle(vm, cell);
  if (e.qjs_is_exception(cell) === 0) return handle;
  handle.dispose();
  vm.getException().dispose();
  return undefined;
}

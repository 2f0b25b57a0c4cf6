/**
 * Turns source into QuickJS bytecode in a per-worker "compiler" VM that has eval and
 * never runs guest code. Guest VMs are created without the EVAL intrinsic, so `eval`
 * and `Function("...")` fail inside them at the engine level, yet they still run the
 * bytecode compiled here. A compiler VM that failed in a way that could have left it
 * damaged is replaced before the next compile.
 */
import { QuickJS, EvalFlags, type JSException } from "quickjs-wasi";
import { CELL_FILENAME, wrapCell } from "../guest/bridge-names.js";
import { PRELUDES, type PreludeName } from "../surfaces/preludes.js";
import { precompiled } from "./precompiled-preludes.js";
import { cellPosition, formatLocation } from "./guest-errors.js";
import { STACK_BYTES } from "./vm-options.js";
import { collectSoon } from "./collect.js";

export type CompileError = { message: string; line: number; column: number };

let compilerVm: QuickJS | undefined;
/**
 * A compiler VM whose memory grew past this is replaced after the compile: WebAssembly
 * memory never shrinks, and one large program (the 1 MiB input limit) left every worker's
 * compiler holding tens of MiB for good.
 */
const COMPILER_MEMORY_BYTES = 8 * 1024 * 1024;

async function compiler(wasm: WebAssembly.Module): Promise<QuickJS> {
  if (!compilerVm) compilerVm = await QuickJS.create({ wasm, maxStackSize: STACK_BYTES, timezoneOffset: 0 });
  return compilerVm;
}

/** A VM's linear memory size (the wrapper keeps the instance's exports). */
const memoryBytes = (vm: QuickJS) => (vm as unknown as { exports: { memory: WebAssembly.Memory } }).exports.memory.buffer.byteLength;

/** The compiler VM's memory now (0 when there is none), for tests. */
export function compilerMemoryBytes(): number {
  return compilerVm ? memoryBytes(compilerVm) : 0;
}

/** Replaces the compiler VM after a compile that grew its memory past COMPILER_MEMORY_BYTES. */
function trim(vm: QuickJS): void {
  if (vm !== compilerVm || memoryBytes(vm) <= COMPILER_MEMORY_BYTES) return;
  discard();
  collectSoon();
}

function discard(): void {
  try {
    compilerVm?.dispose();
  } catch {
    // a trapped instance may fail to dispose; it is dropped either way
  }
  compilerVm = undefined;
}

/** Compiles a classic script. On a syntax error, reports its message and 1-based location. */
export async function compileScript(
  wasm: WebAssembly.Module,
  source: string,
  filename: string,
  compileFlags = 0,
): Promise<{ ok: true; bytecode: Uint8Array } | { ok: false; error: CompileError }> {
  const vm = await compiler(wasm);
  try {
    const bytecode = vm.compile(source, filename, undefined, compileFlags);
    trim(vm);
    return { ok: true, bytecode };
  } catch {
    // compile() drops the location; a COMPILE_ONLY eval reports it in the stack.
  }
  try {
    vm.evalCode(source, filename, EvalFlags.COMPILE_ONLY).dispose();
    trim(vm);
    return { ok: false, error: { message: "SyntaxError: could not compile", line: 1, column: 1 } };
  } catch (err) {
    const e = err as JSException & { name?: string; message?: string; stack?: string };
    const loc = /:(\d+):(\d+)/.exec(String(e.stack ?? ""));
    const error = {
      message: `${e.name ?? "SyntaxError"}: ${e.message ?? "could not compile"}`,
      line: loc ? Number(loc[1]) : 1,
      column: loc ? Number(loc[2]) : 1,
    };
    if (typeof e.dispose === "function") e.dispose();
    if (!(err instanceof Error) || !/SyntaxError|RangeError/.test(error.message)) discard();
    else trim(vm);
    return { ok: false, error };
  }
}

/**
 * Compiles the model's program wrapped as a cell. A syntax error is reported as the
 * model should read it: the message and its position in the model's own source.
 */
export async function compileCell(wasm: WebAssembly.Module, source: string): Promise<{ ok: true; bytecode: Uint8Array } | { ok: false; message: string }> {
  const cell = await compileScript(wasm, wrapCell(source), CELL_FILENAME);
  if (cell.ok) return cell;
  const pos = cellPosition(cell.error.line, cell.error.column);
  return { ok: false, message: `${cell.error.message} (${formatLocation(pos.line, pos.column)})` };
}

const preludes = new Map<PreludeName, Uint8Array>();

/** Prelude `name`'s bytecode: built with the package (./precompiled-preludes.ts) or compiled here, once per worker. */
export async function preludeBytecodeOf(name: PreludeName, wasm: WebAssembly.Module): Promise<Uint8Array> {
  let bytecode = preludes.get(name) ?? precompiled(name);
  if (!bytecode) {
    const p = PRELUDES[name];
    const compiled = await compileScript(wasm, p.source, p.filename, p.flags);
    if (!compiled.ok) throw new Error(`internal: ${p.what} does not compile: ${compiled.error.message} (line ${compiled.error.line})`);
    bytecode = compiled.bytecode;
  }
  preludes.set(name, bytecode);
  return bytecode;
}

/** Code mode's prelude. */
export const preludeBytecode = (wasm: WebAssembly.Module) => preludeBytecodeOf("code", wasm);

/** Drops the compiler VM (after a WASM trap anywhere in this worker, to be safe). */
export function resetCompiler(): void {
  discard();
}

/**
 * Turns source into QuickJS bytecode in a per-worker "compiler" VM that has eval and
 * never runs guest code. Guest VMs are created without the EVAL intrinsic, so `eval`
 * and `Function("...")` fail inside them at the engine level, yet they still run the
 * bytecode compiled here. A compiler VM that failed in a way that could have left it
 * damaged is replaced before the next compile.
 */
import { QuickJS, CompileFlags, EvalFlags, type JSException } from "quickjs-wasi";
import { CELL_FILENAME, PRELUDE_FILENAME, PRELUDE_SOURCE, wrapCell } from "../guest/prelude.js";
import { TOOL_SEARCH_PRELUDE_FILENAME, TOOL_SEARCH_PRELUDE_SOURCE } from "../guest/tool-search-prelude.js";
import { MCP_RUN_PRELUDE_FILENAME, MCP_RUN_PRELUDE_SOURCE } from "../mcp-run/prelude.js";
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

let prelude: Uint8Array | undefined;

/** The guest prelude's bytecode, compiled once per worker. */
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

export async function preludeBytecode(wasm: WebAssembly.Module): Promise<Uint8Array> {
  if (prelude) return prelude;
  // Stripped of its source text and debug info: a third of the size, about 0.2 ms less per
  // VM to load, and the guest cannot read the prelude through Function.prototype.toString.
  const compiled = await compileScript(wasm, PRELUDE_SOURCE, PRELUDE_FILENAME, CompileFlags.STRIP_SOURCE | CompileFlags.STRIP_DEBUG);
  if (!compiled.ok) throw new Error(`internal: the guest prelude does not compile: ${compiled.error.message}`);
  prelude = compiled.bytecode;
  return prelude;
}

let toolSearchPrelude: Uint8Array | undefined;

/** The reduced prelude of the Tool Search surface (`tool_search_code`), compiled once per worker. */
export async function toolSearchPreludeBytecode(wasm: WebAssembly.Module): Promise<Uint8Array> {
  if (toolSearchPrelude) return toolSearchPrelude;
  const compiled = await compileScript(wasm, TOOL_SEARCH_PRELUDE_SOURCE, TOOL_SEARCH_PRELUDE_FILENAME);
  if (!compiled.ok) throw new Error(`internal: the Tool Search prelude does not compile: ${compiled.error.message}`);
  toolSearchPrelude = compiled.bytecode;
  return toolSearchPrelude;
}

let mcpRunPrelude: Uint8Array | undefined;

/** The prelude of the Code Mode for MCP surface (`codemode.run`), compiled once per worker, stripped like code mode's. */
export async function mcpRunPreludeBytecode(wasm: WebAssembly.Module): Promise<Uint8Array> {
  if (mcpRunPrelude) return mcpRunPrelude;
  const compiled = await compileScript(wasm, MCP_RUN_PRELUDE_SOURCE, MCP_RUN_PRELUDE_FILENAME, CompileFlags.STRIP_SOURCE | CompileFlags.STRIP_DEBUG);
  if (!compiled.ok) throw new Error(`internal: the codemode.run prelude does not compile: ${compiled.error.message} (line ${compiled.error.line})`);
  mcpRunPrelude = compiled.bytecode;
  return mcpRunPrelude;
}

/** Drops the compiler VM (after a WASM trap anywhere in this worker, to be safe). */
export function resetCompiler(): void {
  discard();
}

/**
 * One exec in one fresh QuickJS VM: install the prelude, run the cell, and drain it,
 * delivering every host answer that arrives before the deadline into the live VM so
 * the program continues within the same exec. Ends in a TaskOutcome; never throws.
 *
 * Limits enforced here: the deadline (interrupt handler), output bytes, pending tool
 * calls, memory (QuickJS allocator limit) and stack (QuickJS stack guard). The host's
 * wall-clock kill for native loops that ignore interrupts lives on the main thread.
 */
import { QuickJS, JSException, type JSValueHandle } from "quickjs-wasi";
import type { MessagePort } from "node:worker_threads";
import { randomBytes } from "node:crypto";
import type { ErrorCodeName, ExecTask, MainMessage, PlainError, TaskCounters, TaskOutcome, WorkerMessage } from "../task-protocol.js";
import { CELL_FILENAME, CELL_PREFIX, DELIVER_GLOBAL, HOST_ASYNC, HOST_SYNC, PRELUDE_FILENAME, PRELUDE_SOURCE, RUN_GLOBAL, wrapCell } from "../guest/prelude.js";
import { compileScript } from "./compiler.js";
import { guestVmOptions } from "./vm-options.js";
import { parseBridgeJson, BridgeValueError } from "./json-bridge.js";

type Settled = { ok: true; valueJson: string } | { ok: false; errorJson: string };
type Fatal = { code: ErrorCodeName | undefined; message: string };

let preludeBytecode: Uint8Array | undefined;

/**
 * Each output item is charged this much on top of its text, so empty items cannot
 * grow a result without bound (the wire and model forms wrap every item).
 */
export const OUTPUT_ITEM_OVERHEAD_BYTES = 32;

/** An error for the guest: name and message only, no host stack. */
function guestError(name: string, message: string): Error {
  const e = new Error(message);
  e.name = name;
  e.stack = "";
  return e;
}

export function formatLocation(line: number, column: number): string {
  return `line ${line}, column ${column}`;
}

/** Maps a position in the wrapped cell back to the model's source. */
export function cellPosition(line: number, column: number): { line: number; column: number } {
  return line === 1 ? { line, column: Math.max(1, column - CELL_PREFIX.length) } : { line, column };
}

function guestErrorMessage(errorJson: string): string {
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
  if (!m) return message ? `${name}: ${message}` : name;
  const pos = cellPosition(Number(m[1]), Number(m[2]));
  return `${message ? `${name}: ${message}` : name} (${formatLocation(pos.line, pos.column)})`;
}

export async function runExecSession(task: ExecTask, wasm: WebAssembly.Module, cellSource: string): Promise<TaskOutcome> {
  const port: MessagePort = task.port;
  const post = (m: WorkerMessage) => port.postMessage(m);
  const counters: TaskCounters = { search: 0, describe: 0, call: 0 };
  let outputBytes = task.outputBytesUsed;
  const fail = (error: string, code?: ErrorCodeName): TaskOutcome =>
    code ? { status: "failed", error, code, outputBytes, counters } : { status: "failed", error, outputBytes, counters };

  if (!preludeBytecode) {
    const compiled = await compileScript(wasm, PRELUDE_SOURCE, PRELUDE_FILENAME);
    if (!compiled.ok) return fail(`internal: prelude does not compile: ${compiled.error.message}`, "internal_error");
    preludeBytecode = compiled.bytecode;
  }
  const cell = await compileScript(wasm, wrapCell(cellSource), CELL_FILENAME);
  if (!cell.ok) {
    const pos = cellPosition(cell.error.line, cell.error.column);
    return fail(`${cell.error.message} (${formatLocation(pos.line, pos.column)})`, "invalid_input");
  }

  // Set when the VM first gets the thread: time spent queued behind another VM on this
  // worker does not count against this run.
  let deadline = Number.POSITIVE_INFINITY;
  let fatal: Fatal | undefined;
  let cancelled: string | undefined;
  const interrupt = () => fatal !== undefined || cancelled !== undefined || Date.now() > deadline;

  let vm: QuickJS;
  try {
    vm = await QuickJS.create(guestVmOptions(wasm, task.limits.memoryLimitBytes, interrupt));
  } catch (err) {
    return fail(`QuickJS-WASI could not start: ${(err as Error).message}`, "runtime_unavailable");
  }

  let settled: Settled | undefined;
  const pending = new Set<string>();
  const inbox: MainMessage[] = [];
  let wake: (() => void) | undefined;
  const onMessage = (m: MainMessage) => {
    if (m.t === "cancel") cancelled = m.reason;
    else inbox.push(m);
    wake?.();
  };
  port.on("message", onMessage);

  const bootJson = `{"allTools":${task.catalog.allToolsJson},"convenience":${JSON.stringify(task.catalog.convenience)}}`;

  const record = (kind: "text" | "json", data: string) => {
    const bytes = Buffer.byteLength(data, "utf8") + OUTPUT_ITEM_OVERHEAD_BYTES;
    if (outputBytes + bytes > task.limits.maxOutputBytes) {
      fatal = { code: "output_limit_exceeded", message: `code mode output exceeded maxOutputBytes (${task.limits.maxOutputBytes} bytes).` };
      throw guestError("RangeError", fatal.message);
    }
    outputBytes += bytes;
    post({ t: "output", kind, data });
  };

  const hostSync = function (this: JSValueHandle, opH?: JSValueHandle, argH?: JSValueHandle): JSValueHandle {
    try {
      const op = opH?.isString ? opH.toString() : "";
      const arg = argH?.isString ? argH.toString() : "";
      switch (op) {
        case "boot":
          return vm.newString(bootJson);
        case "text":
          record("text", arg);
          return vm.undefined;
        case "json":
          parseBridgeJson(arg, "json() value");
          record("json", arg);
          return vm.undefined;
        case "result":
          if (!settled) settled = { ok: true, valueJson: arg };
          return vm.undefined;
        case "error":
          if (!settled) settled = { ok: false, errorJson: arg };
          return vm.undefined;
        default:
          throw guestError("TypeError", "unknown host operation");
      }
    } catch (err) {
      throw plainForGuest(err);
    }
  };

  const hostAsync = function (this: JSValueHandle, opH?: JSValueHandle, argH?: JSValueHandle): JSValueHandle {
    try {
      const op = opH?.isString ? opH.toString() : "";
      const payloadJson = argH?.isString ? argH.toString() : "null";
      const callId = `c_${randomBytes(9).toString("base64url")}`;
      const payload = parseBridgeJson(payloadJson, "tool input") as Record<string, unknown> | null;
      if (pending.size >= task.limits.maxPendingToolCalls) {
        throw guestError("RangeError", `too many pending tool calls (maxPendingToolCalls is ${task.limits.maxPendingToolCalls}).`);
      }
      if (op === "call") {
        const id = String(payload?.id ?? "");
        counters.call++;
        pending.add(callId);
        post({ t: "call", callId, toolId: id, inputJson: JSON.stringify(payload?.input ?? {}) });
      } else if (op === "search" || op === "describe" || op === "api_list" || op === "api_read") {
        if (op === "search") counters.search++;
        if (op === "describe") counters.describe++;
        pending.add(callId);
        post({ t: "request", reqId: callId, op, payloadJson });
      } else if (op === "yield") {
        pending.add(callId);
        post({ t: "yield", callId, reason: String(payload?.reason ?? "") });
      } else {
        throw guestError("TypeError", "unknown host operation");
      }
      return vm.newString(callId);
    } catch (err) {
      throw plainForGuest(err);
    }
  };

  const deliver = (callId: string, ok: boolean, json: string): void => {
    const fnDesc = vm.global.getOwnPropertyDescriptor(DELIVER_GLOBAL);
    const fn = fnDesc?.value;
    if (!fn) return;
    const a = vm.newString(callId);
    const b = ok ? vm.true : vm.false;
    const c = vm.newString(json);
    try {
      vm.callFunction(fn, vm.undefined, a, b, c).dispose();
    } finally {
      a.dispose();
      c.dispose();
      fn.dispose();
    }
  };

  const outcomeFor = (err: unknown): TaskOutcome => {
    if (fatal) return fail(fatal.message, fatal.code);
    if (cancelled !== undefined) return fail(`code mode exec was cancelled: ${cancelled}`, "internal_error");
    if (Date.now() > deadline) return fail(`code mode exec timed out after ${task.limits.timeoutMs} ms.`, "timeout");
    if (err instanceof JSException) {
      const msg = `${err.name}: ${err.message}`.replace(/^Error: Job execution error: /, "");
      err.dispose();
      return fail(msg);
    }
    if (err instanceof WebAssembly_RuntimeError()) {
      return fail(`RuntimeError: the guest VM crashed (${(err as Error).message}) and was discarded.`);
    }
    return fail(`internal: ${(err as Error)?.message ?? String(err)}`, "internal_error");
  };

  try {
    try {
      deadline = Date.now() + task.limits.timeoutMs;
      const sync = vm.newFunction(HOST_SYNC, hostSync);
      const asyncFn = vm.newFunction(HOST_ASYNC, hostAsync);
      const preludeFn = vm.evalBytecode(preludeBytecode);
      vm.callFunction(preludeFn, vm.undefined, sync, asyncFn).dispose();
      preludeFn.dispose();
      sync.dispose();
      asyncFn.dispose();
      const cellFn = vm.evalBytecode(cell.bytecode);
      const runDesc = vm.global.getOwnPropertyDescriptor(RUN_GLOBAL);
      const run = runDesc!.value!;
      vm.callFunction(run, vm.undefined, cellFn).dispose();
      run.dispose();
      cellFn.dispose();
      for (;;) {
        vm.executePendingJobs();
        if (fatal) return fail(fatal.message, fatal.code);
        if (settled) break;
        if (inbox.length === 0) {
          if (pending.size === 0) {
            return fail("code mode program is awaiting a promise that can never settle (no tool calls are pending).");
          }
          const remaining = deadline - Date.now();
          if (remaining <= 0) return fail(`code mode exec timed out after ${task.limits.timeoutMs} ms.`, "timeout");
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, remaining + 1);
            wake = () => {
              clearTimeout(timer);
              resolve();
            };
          });
          wake = undefined;
          if (cancelled !== undefined) return fail(`code mode exec was cancelled: ${cancelled}`, "internal_error");
          if (inbox.length === 0 && Date.now() > deadline) {
            return fail(`code mode exec timed out after ${task.limits.timeoutMs} ms with ${pending.size} tool call(s) pending.`, "timeout");
          }
        }
        while (inbox.length > 0) {
          const m = inbox.shift()!;
          if (m.t !== "answer" || !pending.delete(m.callId)) continue;
          if (m.ok) deliver(m.callId, true, m.json);
          else deliver(m.callId, false, JSON.stringify(m.error));
        }
      }
    } catch (err) {
      return outcomeFor(err);
    }
    if (!settled.ok) return fail(guestErrorMessage(settled.errorJson));
    const valueBytes = Buffer.byteLength(settled.valueJson, "utf8");
    if (outputBytes + valueBytes > task.limits.maxOutputBytes) {
      return fail(`code mode result exceeded maxOutputBytes (${task.limits.maxOutputBytes} bytes).`, "output_limit_exceeded");
    }
    try {
      parseBridgeJson(settled.valueJson, "result value");
    } catch (err) {
      return fail(`code mode result is not JSON-compatible: ${(err as Error).message}`);
    }
    return { status: "completed", valueJson: settled.valueJson, outputBytes: outputBytes + valueBytes, counters };
  } finally {
    port.off("message", onMessage);
    try {
      vm.dispose();
    } catch {
      // a trapped instance is dropped either way
    }
  }
}

function WebAssembly_RuntimeError(): new (...a: unknown[]) => Error {
  return (globalThis as unknown as { WebAssembly: { RuntimeError: new (...a: unknown[]) => Error } }).WebAssembly.RuntimeError;
}

function plainForGuest(err: unknown): Error {
  if (err instanceof Error && err.stack === "") return err;
  if (err instanceof BridgeValueError) return guestError("TypeError", err.message);
  const e = err as Partial<PlainError>;
  return guestError(typeof e?.name === "string" ? e.name : "Error", typeof e?.message === "string" ? e.message : "host error");
}

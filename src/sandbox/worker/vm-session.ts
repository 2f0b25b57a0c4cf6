/**
 * One segment of a code-mode run in one QuickJS VM: a fresh VM for `exec`, or a VM
 * restored from a snapshot for `wait`. Both end in the same drain loop, which delivers
 * every host answer that arrives before the deadline into the live VM, so the program
 * continues within the same call. Ends in a TaskOutcome; never throws.
 *
 * A segment suspends instead of failing when the deadline passes with host calls still
 * pending, or when the guest yields (`yield_control`) and has nothing else ready: the
 * idle VM is snapshotted, encoded against the base image, and handed back with what it
 * awaits. Host callbacks are registered under stable names, and the guest keeps its
 * awaiting promises in its own table keyed by call id, so a restored VM only needs the
 * callbacks re-registered and the answers delivered by id.
 *
 * Limits enforced here: the deadline (interrupt handler), output bytes, pending host
 * calls, memory (QuickJS allocator limit) and stack (QuickJS stack guard). The host's
 * wall-clock kill for native loops that ignore interrupts lives on the main thread.
 */
import { QuickJS, JSException, type JSValueHandle } from "quickjs-wasi";
import type { MessagePort } from "node:worker_threads";
import { randomBytes } from "node:crypto";
import type { ErrorCodeName, ExecTask, MainMessage, PendingKind, ResumeTask, TaskLimits, TaskOutcome, WorkerMessage } from "../task-protocol.js";
import { DELIVER_GLOBAL, HOST_ASYNC, HOST_SYNC, RUN_GLOBAL } from "../guest/prelude.js";
import { compileCell, preludeBytecode } from "./compiler.js";
import { guestVmOptions } from "./vm-options.js";
import { parseBridgeJson } from "./json-bridge.js";
import { guestError, guestErrorMessage, plainForGuest } from "./guest-errors.js";
import { baseImage } from "./base-image.js";
import { decodeSnapshot, encodeSnapshot, ENCODING_DELTA } from "./snapshot-codec.js";

type Settled = { ok: true; valueJson: string } | { ok: false; errorJson: string };
type Fatal = { code: ErrorCodeName | undefined; message: string };

/** Time the host allows for snapshotting and encoding an idle VM (up to 1 GiB of memory). */
const SNAPSHOT_BUDGET_MS = 30_000;

/**
 * Each output item is charged this much on top of its text, so empty items cannot
 * grow a result without bound (the wire and model forms wrap every item).
 */
export const OUTPUT_ITEM_OVERHEAD_BYTES = 32;

function failed(error: string, outputBytes: number, code?: ErrorCodeName): TaskOutcome {
  return code ? { status: "failed", error, code, outputBytes } : { status: "failed", error, outputBytes };
}

/** The state of one segment: host callbacks, what the guest awaits, and the drain loop. */
class GuestSession {
  vm: QuickJS | undefined;
  /** Set when the VM first gets the thread: time queued behind another VM does not count. */
  deadline = Number.POSITIVE_INFINITY;
  outputBytes: number;
  private fatal: Fatal | undefined;
  private cancelled: string | undefined;
  private settled: Settled | undefined;
  private readonly pending = new Map<string, PendingKind>();
  private readonly inbox: MainMessage[] = [];
  private wake: (() => void) | undefined;
  private readonly onMessage = (m: MainMessage) => {
    if (m.t === "cancel") this.cancelled = m.reason;
    else this.inbox.push(m);
    this.wake?.();
  };

  constructor(
    private readonly port: MessagePort,
    private readonly limits: TaskLimits,
    outputBytesUsed: number,
    private readonly bootJson: string,
  ) {
    this.outputBytes = outputBytesUsed;
    port.on("message", this.onMessage);
  }

  readonly interrupt = () => this.fatal !== undefined || this.cancelled !== undefined || Date.now() > this.deadline;

  private post(m: WorkerMessage): void {
    this.port.postMessage(m);
  }

  fail(error: string, code?: ErrorCodeName): TaskOutcome {
    return failed(error, this.outputBytes, code);
  }

  /** Starts the VM's deadline, and moves the host's kill timer with it. */
  startDeadline(): void {
    this.deadline = Date.now() + this.limits.timeoutMs;
    this.post({ t: "watch", untilMs: this.deadline });
  }

  awaitAgain(callId: string, kind: PendingKind): void {
    this.pending.set(callId, kind);
  }

  enqueue(m: MainMessage): void {
    this.inbox.push(m);
  }

  private record(kind: "text" | "json", data: string): void {
    const bytes = Buffer.byteLength(data, "utf8") + OUTPUT_ITEM_OVERHEAD_BYTES;
    if (this.outputBytes + bytes > this.limits.maxOutputBytes) {
      this.fatal = { code: "output_limit_exceeded", message: `code mode output exceeded maxOutputBytes (${this.limits.maxOutputBytes} bytes).` };
      throw guestError("RangeError", this.fatal.message);
    }
    this.outputBytes += bytes;
    this.post({ t: "output", kind, data });
  }

  readonly hostSync = (opH?: JSValueHandle, argH?: JSValueHandle): JSValueHandle => {
    const vm = this.vm!;
    try {
      const op = opH?.isString ? opH.toString() : "";
      const arg = argH?.isString ? argH.toString() : "";
      switch (op) {
        case "boot":
          return vm.newString(this.bootJson);
        case "text":
          this.record("text", arg);
          return vm.undefined;
        case "json":
          parseBridgeJson(arg, "json() value");
          this.record("json", arg);
          return vm.undefined;
        case "result":
          if (!this.settled) this.settled = { ok: true, valueJson: arg };
          return vm.undefined;
        case "error":
          if (!this.settled) this.settled = { ok: false, errorJson: arg };
          return vm.undefined;
        default:
          throw guestError("TypeError", "unknown host operation");
      }
    } catch (err) {
      throw plainForGuest(err);
    }
  };

  readonly hostAsync = (opH?: JSValueHandle, argH?: JSValueHandle): JSValueHandle => {
    const vm = this.vm!;
    try {
      const op = opH?.isString ? opH.toString() : "";
      const payloadJson = argH?.isString ? argH.toString() : "null";
      const callId = `c_${randomBytes(9).toString("base64url")}`;
      const payload = parseBridgeJson(payloadJson, "tool input") as Record<string, unknown> | null;
      if (this.pending.size >= this.limits.maxPendingToolCalls) {
        throw guestError("RangeError", `too many pending tool calls (maxPendingToolCalls is ${this.limits.maxPendingToolCalls}).`);
      }
      if (op === "call" || op === "mcp") {
        this.pending.set(callId, "call");
        this.post({ t: "call", callId, via: op === "call" ? "tools" : "mcp", target: String(payload?.id ?? ""), path: "", inputJson: JSON.stringify(payload?.input ?? {}) });
      } else if (op === "ns") {
        this.pending.set(callId, "call");
        const args = payload?.args;
        this.post({ t: "call", callId, via: "ns", target: String(payload?.ns ?? ""), path: String(payload?.path ?? ""), inputJson: JSON.stringify(Array.isArray(args) ? args : []) });
      } else if (op === "search" || op === "describe" || op === "api_list" || op === "api_read" || op === "mcp_api") {
        this.pending.set(callId, "request");
        this.post({ t: "request", reqId: callId, op, payloadJson });
      } else if (op === "yield") {
        this.pending.set(callId, "yield");
        this.post({ t: "yield", callId, reason: String(payload?.reason ?? "") });
      } else {
        throw guestError("TypeError", "unknown host operation");
      }
      return vm.newString(callId);
    } catch (err) {
      throw plainForGuest(err);
    }
  };

  private deliver(callId: string, ok: boolean, json: string): void {
    const vm = this.vm!;
    const fn = vm.global.getOwnPropertyDescriptor(DELIVER_GLOBAL)?.value;
    if (!fn) return;
    const a = vm.newString(callId);
    const c = vm.newString(json);
    try {
      vm.callFunction(fn, vm.undefined, a, ok ? vm.true : vm.false, c).dispose();
    } finally {
      a.dispose();
      c.dispose();
      fn.dispose();
    }
  }

  private outcomeFor(err: unknown): TaskOutcome {
    if (this.fatal) return this.fail(this.fatal.message, this.fatal.code);
    if (this.cancelled !== undefined) return this.fail(`code mode exec was cancelled: ${this.cancelled}`, "internal_error");
    if (Date.now() > this.deadline) return this.fail(`code mode exec timed out after ${this.limits.timeoutMs} ms.`, "timeout");
    if (err instanceof JSException) {
      const msg = `${err.name}: ${err.message}`.replace(/^Error: Job execution error: /, "");
      err.dispose();
      return this.fail(msg);
    }
    if (err instanceof WebAssembly_RuntimeError()) {
      return this.fail(`RuntimeError: the guest VM crashed (${(err as Error).message}) and was discarded.`);
    }
    return this.fail(`internal: ${(err as Error)?.message ?? String(err)}`, "internal_error");
  }

  private hasPendingYield(): boolean {
    for (const kind of this.pending.values()) if (kind === "yield") return true;
    return false;
  }

  /** Snapshots the idle VM for a `wait` to continue later. */
  private async suspend(reason: "pending_tools" | "yield", wasm: WebAssembly.Module): Promise<TaskOutcome> {
    const t0 = performance.now();
    this.post({ t: "watch", untilMs: Date.now() + SNAPSHOT_BUDGET_MS });
    const encoded = encodeSnapshot(this.vm!.snapshot(), await baseImage(wasm));
    return {
      status: "suspended",
      reason,
      envelope: encoded.envelope,
      pending: [...this.pending].map(([callId, kind]) => ({ callId, kind })),
      outputBytes: this.outputBytes,
      snapshot: {
        encoding: encoded.encoding === ENCODING_DELTA ? "delta" : "plain",
        memoryBytes: encoded.memoryBytes,
        changedPages: encoded.changedPages,
        encodeMs: performance.now() - t0,
      },
    };
  }

  /** Runs `start` (which puts the program in motion), then drains until the segment ends. */
  async run(start: () => void, wasm: WebAssembly.Module): Promise<TaskOutcome> {
    try {
      try {
        start();
        for (;;) {
          this.vm!.executePendingJobs();
          if (this.fatal) return this.fail(this.fatal.message, this.fatal.code);
          if (this.settled) break;
          if (this.inbox.length === 0) {
            if (this.pending.size === 0) {
              return this.fail("code mode program is awaiting a promise that can never settle (no tool calls are pending).");
            }
            if (this.hasPendingYield()) return await this.suspend("yield", wasm);
            const remaining = this.deadline - Date.now();
            if (remaining <= 0) return await this.suspend("pending_tools", wasm);
            await new Promise<void>((resolve) => {
              const timer = setTimeout(resolve, remaining + 1);
              this.wake = () => {
                clearTimeout(timer);
                resolve();
              };
            });
            this.wake = undefined;
            if (this.cancelled !== undefined) return this.fail(`code mode exec was cancelled: ${this.cancelled}`, "internal_error");
            if (this.inbox.length === 0 && Date.now() > this.deadline) return await this.suspend("pending_tools", wasm);
          }
          while (this.inbox.length > 0) {
            const m = this.inbox.shift()!;
            if (m.t !== "answer" || !this.pending.delete(m.callId)) continue;
            if (m.ok) this.deliver(m.callId, true, m.json);
            else this.deliver(m.callId, false, JSON.stringify(m.error));
          }
        }
      } catch (err) {
        return this.outcomeFor(err);
      }
      return this.completion(this.settled);
    } finally {
      this.port.off("message", this.onMessage);
      try {
        this.vm?.dispose();
      } catch {
        // a trapped instance is dropped either way
      }
    }
  }

  private completion(settled: Settled): TaskOutcome {
    if (!settled.ok) return this.fail(guestErrorMessage(settled.errorJson));
    const valueBytes = Buffer.byteLength(settled.valueJson, "utf8");
    if (this.outputBytes + valueBytes > this.limits.maxOutputBytes) {
      return this.fail(`code mode result exceeded maxOutputBytes (${this.limits.maxOutputBytes} bytes).`, "output_limit_exceeded");
    }
    try {
      parseBridgeJson(settled.valueJson, "result value");
    } catch (err) {
      return this.fail(`code mode result is not JSON-compatible: ${(err as Error).message}`);
    }
    return { status: "completed", valueJson: settled.valueJson, outputBytes: this.outputBytes + valueBytes };
  }

  dispose(): void {
    this.port.off("message", this.onMessage);
  }
}

export async function runExecSession(task: ExecTask, wasm: WebAssembly.Module, cellSource: string): Promise<TaskOutcome> {
  let prelude: Uint8Array;
  try {
    prelude = await preludeBytecode(wasm);
  } catch (err) {
    return failed((err as Error).message, task.outputBytesUsed, "internal_error");
  }
  const cell = await compileCell(wasm, cellSource);
  if (!cell.ok) return failed(cell.message, task.outputBytesUsed, "invalid_input");
  const bootJson = `{"catalog":${task.catalog.staticJson},"context":${task.contextJson}}`;
  const session = new GuestSession(task.port, task.limits, task.outputBytesUsed, bootJson);
  try {
    session.vm = await QuickJS.create(guestVmOptions(wasm, task.limits.memoryLimitBytes, session.interrupt));
  } catch (err) {
    session.dispose();
    return failed(`QuickJS-WASI could not start: ${(err as Error).message}`, task.outputBytesUsed, "runtime_unavailable");
  }
  return session.run(() => {
    const vm = session.vm!;
    session.startDeadline();
    const sync = vm.newFunction(HOST_SYNC, session.hostSync);
    const asyncFn = vm.newFunction(HOST_ASYNC, session.hostAsync);
    const preludeFn = vm.evalBytecode(prelude);
    vm.callFunction(preludeFn, vm.undefined, sync, asyncFn).dispose();
    preludeFn.dispose();
    sync.dispose();
    asyncFn.dispose();
    const cellFn = vm.evalBytecode(cell.bytecode);
    const run = vm.global.getOwnPropertyDescriptor(RUN_GLOBAL)!.value!;
    vm.callFunction(run, vm.undefined, cellFn).dispose();
    run.dispose();
    cellFn.dispose();
  }, wasm);
}

export async function runResumeSession(task: ResumeTask, wasm: WebAssembly.Module): Promise<TaskOutcome> {
  const session = new GuestSession(task.port, task.limits, task.outputBytesUsed, "{}");
  // Decoding and restoring a large snapshot must not count against the VM's deadline.
  task.port.postMessage({ t: "watch", untilMs: Date.now() + SNAPSHOT_BUDGET_MS } satisfies WorkerMessage);
  try {
    const snapshot = decodeSnapshot(task.envelope, await baseImage(wasm));
    session.vm = await QuickJS.restore(snapshot, guestVmOptions(wasm, task.limits.memoryLimitBytes, session.interrupt));
  } catch (err) {
    session.dispose();
    return failed(`code mode could not restore the suspended run: ${(err as Error).message}`, task.outputBytesUsed, "internal_error");
  }
  for (const p of task.pending) session.awaitAgain(p.callId, p.kind);
  for (const a of task.answers) session.enqueue(a);
  return session.run(() => {
    const vm = session.vm!;
    session.startDeadline();
    vm.registerHostCallback(HOST_SYNC, session.hostSync);
    vm.registerHostCallback(HOST_ASYNC, session.hostAsync);
  }, wasm);
}

function WebAssembly_RuntimeError(): new (...a: unknown[]) => Error {
  return (globalThis as unknown as { WebAssembly: { RuntimeError: new (...a: unknown[]) => Error } }).WebAssembly.RuntimeError;
}

/**
 * How each kind of task starts its VM session: an exec gets an instance reset to the
 * prepared image of its prelude and catalog (./warm-vms.ts), or a fresh VM with the
 * prelude when it needs an extension or per-run context, and runs its compiled cell; a
 * resumed segment (`wait`) a VM restored from its
 * authenticated snapshot; a moved one (its thread was killed for a neighbour) a VM
 * restored from the image it parked. All then run the same drain loop (./vm-session.ts).
 */
import { QuickJS, type JSValueHandle } from "quickjs-wasi";
import {
  EMPTY_BOOT_JSON,
  type ExecTask,
  type GuestCatalog,
  type ResumeTask,
  type TaskOutcome,
  type TaskSurface,
  type UnparkTask,
  type VmStart,
  type WorkerMessage,
} from "../pool/task-protocol.js";
import { HOST_ASYNC, HOST_SYNC, SETTLEMENT_QUERY } from "../guest/bridge-names.js";
import { compileCell, preludeBytecodeOf } from "./compiler.js";
import { guestVmOptions } from "./vm-options.js";
import { baseImage } from "./base-image.js";
import { OTHER_BUILD, openSnapshot } from "./snapshot-codec.js";
import { extensionDescriptors, extensionsFor } from "./extensions.js";
import { failed, GuestSession, SNAPSHOT_BUDGET_MS } from "./vm-session.js";
import { WarmVms } from "./warm-vms.js";
import type { TapePlayer } from "./replay-tape.js";
import { memoryBytes, usedPast, type PreparedImage, type ResetSource } from "./instance-reset.js";

let warm: WarmVms | undefined;
/** This worker's reusable instances and prepared images. */
export function warmVms(wasm: WebAssembly.Module): WarmVms {
  warm ??= new WarmVms(wasm);
  return warm;
}

/** This worker's reusable instances, if any were made yet. */
export function currentWarmVms(): WarmVms | undefined {
  return warm;
}

export async function runExecSession(task: ExecTask & { catalog: GuestCatalog }, wasm: WebAssembly.Module, cellSource: string): Promise<TaskOutcome> {
  let prelude: Uint8Array;
  try {
    // Tool Search (`tool_search_code`) gets its reduced prelude; the session is the same.
    prelude = await preludeBytecodeOf(task.surface ?? "code", wasm);
  } catch (err) {
    return failed((err as Error).message, task.outputBytesUsed, "internal_error");
  }
  const cell = await compileCell(wasm, cellSource);
  if (!cell.ok) return failed(cell.message, task.outputBytesUsed, "invalid_input");
  // Code mode's session store is on unless the run turned it off (its prelude reads `store`).
  const sessionStore = task.sessionStore !== false;
  const bootJson = `{"catalog":${task.catalog.staticJson},"context":${task.contextJson},"store":${sessionStore}}`;
  const session = new GuestSession(task.port, task.limits, task.outputBytesUsed, bootJson);
  session.bind(task);
  tapeFor(session, task);
  session.neverSuspends = neverSuspends(task.surface);
  session.source = cellSource;
  session.allToolsJson = task.catalog.allToolsJson;
  session.convenienceJson = task.catalog.convenienceJson;
  const extensionNames = extensionsFor(cellSource);
  // The common case reuses an instance reset to a prepared image (./warm-vms.ts): code mode
  // and Tool Search preludes, no per-run context in the boot data, the session store on, no extension.
  if (task.surface !== "mcp_run" && task.contextJson === "null" && sessionStore && extensionNames.length === 0 && !warmVms(wasm).disabled) {
    const warm = warmVms(wasm);
    let image: PreparedImage | undefined;
    let how: VmStart = "restored";
    try {
      // A versioned catalog names its image (no hashing of the boot data per exec). Tool
      // Search's prelude uses nothing of its boot answer: one image, booted with no
      // catalog, serves every run.
      if (task.surface === "tool_search") image = await warm.image(prelude, EMPTY_BOOT_JSON, "tool_search");
      else image = await warm.image(prelude, bootJson, task.catalog.version ? `${task.surface ?? "code"}:${task.catalog.version}` : undefined);
      if (image) {
        const got = await warm.acquire(image, task.limits.memoryLimitBytes, session.interrupt, session.hostSync, session.hostAsync, task.roomy === true);
        session.vm = got.vm;
        how = got.how;
      }
    } catch (err) {
      session.dispose();
      return failed(`QuickJS-WASI could not start: ${(err as Error).message}`, task.outputBytesUsed, "runtime_unavailable");
    }
    if (image && session.vm) {
      const prepared = image;
      // Whether the run needed more than an image-sized instance (it grew its instance, or
      // used the room of the grown one it started on): the pool then gives its session's
      // next execs room (../pool/room-hints.ts). Without the second, a session of large answers
      // got an image-sized instance every ROOMY_EXECS + 1 execs, grew it, and the worker
      // dropped one of its two grown instances (with a full collection of its heap).
      const startBytes = memoryBytes(session.vm);
      const imageBytes = prepared.memory.byteLength;
      let grew = false;
      session.recycle = (vm, healthy) => {
        grew = memoryBytes(vm) > startBytes || (startBytes > imageBytes && usedPast(vm, imageBytes));
        warm.release(vm, healthy);
      };
      const outcome = await session.run(() => {
        const vm = session.vm!;
        session.startDeadline();
        session.deliverFn = vm.importHandle(prepared.deliverToken);
        session.guestToken = prepared.deliverToken;
        const run = vm.importHandle(prepared.runToken);
        const cellFn = vm.evalBytecode(cell.bytecode);
        vm.callFunction(run, vm.undefined, cellFn).dispose();
        run.dispose();
        cellFn.dispose();
      }, wasm);
      return { ...outcome, vmStart: how, ...(grew ? { grew } : {}) };
    }
  }
  try {
    const extensions = await extensionDescriptors(extensionNames);
    const options = guestVmOptions(wasm, task.limits.memoryLimitBytes, session.interrupt);
    session.vm = await QuickJS.create(extensions.length > 0 ? { ...options, extensions } : options);
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
    // The prelude returns [deliver, run, boot] instead of publishing them on globalThis
    // (codemode.run's returns no boot: it booted as it ran).
    const api = vm.callFunction(preludeFn, vm.undefined, sync, asyncFn);
    preludeFn.dispose();
    session.deliverFn = api.getProp("0");
    const run = api.getProp("1");
    const boot = api.getProp("2");
    api.dispose();
    if (boot.isFunction) vm.callFunction(boot, vm.undefined).dispose();
    boot.dispose();
    sync.dispose();
    asyncFn.dispose();
    session.guestToken = vm.exportHandle(session.deliverFn);
    const cellFn = vm.evalBytecode(cell.bytecode);
    vm.callFunction(run, vm.undefined, cellFn).dispose();
    run.dispose();
    cellFn.dispose();
  }, wasm);
}

export async function runResumeSession(task: ResumeTask, wasm: WebAssembly.Module): Promise<TaskOutcome> {
  const session = new GuestSession(task.port, task.limits, task.outputBytesUsed, "{}");
  session.bind(task);
  tapeFor(session, task);
  if (task.allToolsJson !== undefined) session.allToolsJson = task.allToolsJson;
  if (task.convenienceJson !== undefined) session.convenienceJson = task.convenienceJson;
  // Decoding and restoring a large snapshot must not count against the VM's deadline.
  task.port.postMessage({ t: "watch", untilMs: Date.now() + SNAPSHOT_BUDGET_MS } satisfies WorkerMessage);
  let how: VmStart;
  try {
    const snapshot = openSnapshot(task.envelope, await baseImage(wasm));
    how = await startFrom(session, wasm, { ...snapshot, write: (t) => snapshot.writeMemory(t) }, snapshot.extensions, snapshot.guestToken);
  } catch (err) {
    session.dispose();
    const out = failed(`code mode could not restore the suspended run: ${(err as Error).message}`, task.outputBytesUsed, "internal_error");
    // Known from the restore itself, never from a message a program could write (../suspend/rebuild.ts).
    return (err as Error).message === OTHER_BUILD ? { ...out, otherBuild: true } : out;
  }
  for (const p of task.pending) session.awaitAgain(p.callId, p.kind, p.dueAtMs);
  for (const a of task.answers) session.enqueue(a);
  return { ...(await session.run(() => session.startDeadline(), wasm)), vmStart: how };
}

/** A recorded task's session keeps its tape; a replayed one (../replay) plays the one it is given. */
function tapeFor(session: GuestSession, task: { record?: true; replay?: TapePlayer }): void {
  if (task.replay) session.useTape(task.replay);
  else if (task.record) session.useTape();
}

/** Surfaces whose runs end at their deadline instead of suspending (tool_search_code, codemode.run): no snapshot is taken. */
function neverSuspends(surface: TaskSurface | undefined): boolean {
  return surface === "tool_search" || surface === "mcp_run";
}

/** Continues a VM parked by a worker that was killed for another run's loop. */
export async function runUnparkSession(task: UnparkTask, wasm: WebAssembly.Module): Promise<TaskOutcome> {
  const session = new GuestSession(task.port, task.limits, task.outputBytesUsed, "{}");
  session.bind(task);
  // What the VM consumed before it moved stayed with the lost thread: its record ends here.
  if (task.record) {
    session.useTape();
    session.cutTape("the run moved to another worker thread");
  }
  // A run moved from its parked image keeps its surface's rule (it was snapshotted at its deadline before).
  session.neverSuspends = neverSuspends(task.surface);
  if (task.allToolsJson !== undefined) session.allToolsJson = task.allToolsJson;
  if (task.convenienceJson !== undefined) session.convenienceJson = task.convenienceJson;
  let how: VmStart;
  try {
    const p = task.parked;
    how = await startFrom(
      session,
      wasm,
      {
        memoryBytes: p.memoryBytes,
        stackPointer: p.stackPointer,
        runtimePtr: p.runtimePtr,
        contextPtr: p.contextPtr,
        write: (t) => {
          t.set(p.memory);
          t.fill(0, p.memory.byteLength);
        },
      },
      p.extensions,
      p.guestToken,
    );
  } catch (err) {
    session.dispose();
    return failed(`code mode could not continue the run on another worker: ${(err as Error).message}`, task.outputBytesUsed, "internal_error");
  }
  for (const p of task.pending) session.awaitAgain(p.callId, p.kind, p.dueAtMs);
  for (const a of task.answers) session.enqueue(a);
  return { ...(await session.run(() => session.startDeadline(task.deadlineAtMs), wasm)), vmStart: how };
}

/**
 * Puts a suspended or parked VM's state into an instance for `session`: a spare
 * overwritten with it (./warm-vms.ts; the same guarantee as an exec's reset), or, with
 * extensions or without reusable instances, a new instance restored from it.
 */
async function startFrom(
  session: GuestSession,
  wasm: WebAssembly.Module,
  state: ResetSource,
  extensionsOf: ReadonlyArray<{ name: string; memoryBase: number; tableBase: number; initFn: string }>,
  guestToken: number,
): Promise<VmStart> {
  const pool = warmVms(wasm);
  const got =
    extensionsOf.length === 0 ? pool.acquireState(state, session.limits.memoryLimitBytes, session.interrupt, session.hostSync, session.hostAsync) : undefined;
  let how: VmStart = "snapshot";
  if (got) {
    const { vm, how: made } = await got;
    session.vm = vm;
    session.recycle = (v, healthy) => pool.release(v, healthy);
    if (made === "reused") how = "reused";
  } else {
    const memory = new Uint8Array(state.memoryBytes);
    state.write(memory);
    const extensions = await extensionDescriptors(extensionsOf.map((e) => e.name));
    const options = guestVmOptions(wasm, session.limits.memoryLimitBytes, session.interrupt);
    const snapshot = { memory, stackPointer: state.stackPointer, runtimePtr: state.runtimePtr, contextPtr: state.contextPtr, extensions: [...extensionsOf] };
    session.vm = await QuickJS.restore(snapshot, extensions.length > 0 ? { ...options, extensions } : options);
    session.vm.registerHostCallback(HOST_SYNC, session.hostSync);
    session.vm.registerHostCallback(HOST_ASYNC, session.hostAsync);
  }
  try {
    session.guestToken = guestToken;
    session.deliverFn = session.vm.importHandle(guestToken);
    session.restoreSettlement(settlementOf(session.vm, session.deliverFn));
  } catch (err) {
    // A state that does not answer as a suspended VM must leave no instance behind to reuse.
    const vm = session.vm;
    session.vm = session.deliverFn = undefined;
    session.recycle = undefined;
    try {
      vm.dispose();
    } catch {
      // dropped either way
    }
    throw err;
  }
  return how;
}

/** Asks a restored VM's prelude how its program had settled ("" while it had not). */
function settlementOf(vm: QuickJS, deliver: JSValueHandle): string {
  const q = vm.newString(SETTLEMENT_QUERY);
  const e = vm.newString("");
  try {
    const h = vm.callFunction(deliver, vm.undefined, q, vm.false, e);
    const s = h.isString ? h.toString() : "";
    h.dispose();
    return s;
  } finally {
    q.dispose();
    e.dispose();
  }
}

/**
 * Which VM sessions this worker thread hosts right now. A thread is killed when one guest's
 * native loop ignores its deadline, and every VM on it dies with it; so whenever a thread
 * hosts more than one session, each idle VM keeps a parked copy of itself on the main
 * thread (GuestSession.parkIfIdle, ./vm-session.ts), from which the pool continues it on
 * another thread. A session that arrives parks its idle neighbours before it runs anything.
 *
 * The pool may also move a parked VM while a neighbour holds the thread (the VM could not
 * take an answer before the neighbour yields): the task's claim word decides who owns the
 * run, without a race (../pool/task-protocol.ts, `claim`).
 */
import type { QuickJS } from "quickjs-wasi";
import { liveState } from "./instance-reset.js";
import { nonZeroEnd } from "./zero-tail.js";
import { CLAIM_MOVED, CLAIM_PARKED, CLAIM_STARTED, parkedClaim, type ParkedVm } from "../pool/task-protocol.js";

export type Parkable = { parkIfIdle(): void };

const sessions = new Set<Parkable>();

export function enter(session: Parkable): void {
  for (const other of sessions) other.parkIfIdle();
  sessions.add(session);
}

export function leave(session: Parkable): void {
  sessions.delete(session);
}

/** True when another session shares this thread. */
export function cohosted(): boolean {
  return sessions.size > 1;
}

/**
 * An idle VM's parked image: a copy of its memory up to the last non-zero byte (a grown
 * instance's zero tail is not copied), with the buffer to transfer (not copy again) to the
 * main thread.
 */
export function parkedImage(vm: QuickJS, guestToken: number): { parked: ParkedVm; transfer: ArrayBuffer[] } {
  const snap = liveState(vm) ?? vm.snapshot();
  const memory = snap.memory.slice(0, nonZeroEnd(snap.memory));
  const parked: ParkedVm = {
    memory,
    memoryBytes: snap.memory.byteLength,
    stackPointer: snap.stackPointer,
    runtimePtr: snap.runtimePtr,
    contextPtr: snap.contextPtr,
    extensions: snap.extensions.map((e) => ({ name: e.name, memoryBase: e.memoryBase, tableBase: e.tableBase, initFn: e.initFn })),
    guestToken,
  };
  return { parked, transfer: [memory.buffer as ArrayBuffer] };
}

/** After posting image `seq`: the pool may now move the run from that image. */
export function publishParked(claim: Int32Array | undefined, seq: number): void {
  if (claim) Atomics.compareExchange(claim, 0, CLAIM_STARTED, parkedClaim(seq));
}

/**
 * On waking: takes the run back from the parked state. False when the pool moved the run
 * to another thread meanwhile; the VM must then give it up without running anything.
 */
export function stillOwned(claim: Int32Array | undefined): boolean {
  if (!claim) return true;
  const state = Atomics.load(claim, 0);
  if ((state & 7) === CLAIM_PARKED && Atomics.compareExchange(claim, 0, state, CLAIM_STARTED) === state) return true;
  return Atomics.load(claim, 0) !== CLAIM_MOVED;
}

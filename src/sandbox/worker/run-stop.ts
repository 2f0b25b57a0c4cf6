/**
 * When a VM session must stop, and the interrupt handler QuickJS polls: the deadline, a
 * cancel (the gateway's message, or its flag in shared memory before the message arrives)
 * and a fatal limit the host hit. The first "stop" the handler gives stands: the session
 * ends then whatever the engine did with its uncatchable error, and an engine that polls
 * again past INTERRUPT_GRACE_MS gets a host error thrown through the WASM frames, so the
 * instance is abandoned without a thread kill. It never says stop while `quiet` (prelude
 * code the host runs before a snapshot). Used by ./vm-session.ts; must stay cheap: QuickJS
 * calls `interrupt` at every poll.
 */
import type { ErrorCodeName } from "../pool/task-protocol.js";

export type Fatal = { code: ErrorCodeName | undefined; message: string };

/** How long guest code may keep running after QuickJS was told to stop before the instance is abandoned. */
export const INTERRUPT_GRACE_MS = 25;

/** Thrown by the interrupt handler through the WASM stack when the engine dropped its interrupt. */
class InterruptIgnored extends Error {}

export class RunStop {
  /** Set when the VM first gets the thread: time queued behind another VM does not count. */
  deadline = Number.POSITIVE_INFINITY;
  /** A limit the host hit (output, memory): the session fails with it. */
  fatal: Fatal | undefined;
  /** The cancel message's reason. */
  cancelled: string | undefined;
  /** Set by the main thread through shared memory when the task is cancelled. */
  cancelFlag: Int32Array | undefined;
  /** Set while the host lets go of answers before a snapshot (prelude code only): a passed deadline must not fail that call. */
  quiet = false;
  /** When QuickJS was first told to stop (0: never). */
  private interruptedAt = 0;

  /** Whether the run must stop now (deadline, cancel, fatal); a plain read, for host code. */
  readonly due = (): boolean =>
    this.fatal !== undefined ||
    this.cancelled !== undefined ||
    (this.cancelFlag !== undefined && Atomics.load(this.cancelFlag, 0) !== 0) ||
    Date.now() > this.deadline;

  /**
   * The VM's interrupt handler. QuickJS throws its uncatchable "interrupted" when this says
   * true, but some engine paths drop that exception: build_backtrace discards whatever a
   * guest `Error.prepareStackTrace` threw, and a native that converts two arguments in a
   * row (URLSearchParams append/set) lets the second conversion's catchable error replace
   * it. So the first true is the polite stop; if the engine asks again more than
   * INTERRUPT_GRACE_MS later, guest code is still running after it was stopped: the handler
   * throws, and the session fails with its timeout or cancel.
   */
  readonly interrupt = (): boolean => {
    if (this.quiet || !this.due()) return false;
    const now = Date.now();
    if (this.interruptedAt === 0) this.interruptedAt = now;
    else if (now - this.interruptedAt > INTERRUPT_GRACE_MS) throw new InterruptIgnored();
    return true;
  };

  /** Whether the handler already told QuickJS to stop: the run ends, whatever the engine did with it. */
  get stopped(): boolean {
    return this.interruptedAt !== 0;
  }

  /** Cancelled by the gateway (or the drain), known from the flag even before the message arrives. */
  cancelReason(): string | undefined {
    if (this.cancelled !== undefined) return this.cancelled;
    return this.cancelFlag !== undefined && Atomics.load(this.cancelFlag, 0) !== 0 ? "the gateway cancelled the call" : undefined;
  }
}

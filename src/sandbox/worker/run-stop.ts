/**
 * When a VM session must stop, and the interrupt handler QuickJS polls: the deadline, a
 * cancel (the gateway's message, or its flag in shared memory before the message arrives)
 * and a fatal limit the host hit. The first "stop" the handler gives stands: the session
 * ends then whatever the engine did with its uncatchable error, and an engine that polls
 * again past INTERRUPT_GRACE_MS gets a host error thrown through the WASM frames, so the
 * instance is abandoned without a thread kill. It never says stop while `quiet` (prelude
 * code the host runs before a snapshot). Used by ./vm-session.ts; must stay cheap: QuickJS
 * calls `interrupt` at every poll. A recorded run's polls are counted on its tape, and a
 * replayed run stops at the poll its record stopped at, for the same reason (./replay-tape.ts).
 */
import type { ErrorCodeName } from "../pool/task-protocol.js";
import type { TapePlayer, TapeRecorder } from "./replay-tape.js";

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
    if (this.script) return this.scripted();
    if (this.quiet || !this.due()) {
      this.tape?.poll(false, false, undefined);
      return false;
    }
    const now = Date.now();
    const threw = this.interruptedAt !== 0 && now - this.interruptedAt > INTERRUPT_GRACE_MS;
    this.tape?.poll(true, threw, this.fatal ? undefined : this.cancelReason() !== undefined ? { cancel: this.cancelReason()! } : { timeout: true });
    if (this.interruptedAt === 0) this.interruptedAt = now;
    else if (threw) throw new InterruptIgnored();
    return true;
  };

  /** A recorded run's polls (./replay-tape.ts): each interrupt poll is counted. */
  tape: TapeRecorder | undefined;
  /** A replayed run stops at the poll its record stopped at, for the same reason, and nowhere else. */
  script: TapePlayer | undefined;

  private scripted(): boolean {
    const player = this.script!;
    const { stop, throw: give } = player.poll();
    if (this.quiet) return false;
    if (give) throw new InterruptIgnored();
    if (!stop) return false;
    const by = player.tape.stopBy;
    if (player.stopped) this.fatal ??= { code: "internal_error", message: "the replay stopped here" };
    else if (by && "cancel" in by) this.cancelled ??= by.cancel;
    else this.deadline = Number.NEGATIVE_INFINITY;
    if (this.interruptedAt === 0) this.interruptedAt = Date.now();
    return true;
  }

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

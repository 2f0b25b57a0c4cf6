/**
 * Signals for a drain's hold on the calls in flight, shared by all of them, and a way to
 * combine a call's own signal with them that lets go again.
 *
 * One pair of controllers (one to cancel the calls when the drain's grace runs out, one to
 * suspend them) serves every call in flight and is replaced once used, so a call that
 * starts later is not touched: controllers and an AbortSignal.any of their own would cost
 * the main thread on every exec.
 *
 * A shared signal must never be given to AbortSignal.any: Node 20 keeps a reference from
 * each source to every signal `any` made from it, for good, so the source would grow with
 * every call. `linkedSignal` detaches when done.
 */
import { setMaxListeners } from "node:events";

/** A controller whose signal may carry a listener per call in flight without a warning. */
function sharedController(): AbortController {
  const c = new AbortController();
  setMaxListeners(0, c.signal);
  return c;
}

export class DrainSignals {
  private cancelling = sharedController();
  private suspending = sharedController();

  /** Aborts (with the drain's reason) when the calls in flight now must stop. */
  get cancel(): AbortSignal {
    return this.cancelling.signal;
  }

  /** Aborts when the calls in flight now should suspend at their next idle moment. */
  get suspend(): AbortSignal {
    return this.suspending.signal;
  }

  cancelAll(reason: string): void {
    const c = this.cancelling;
    this.cancelling = sharedController();
    c.abort(reason);
  }

  suspendAll(): void {
    const s = this.suspending;
    this.suspending = sharedController();
    s.abort("drain");
  }
}

/**
 * A signal that aborts with the reason of the first of `sources` to abort, and `done()`,
 * which detaches it from the sources (call it when the signal is no longer needed).
 */
export function linkedSignal(sources: readonly AbortSignal[]): { signal: AbortSignal; done(): void } {
  const ac = new AbortController();
  const detach: Array<() => void> = [];
  const done = () => {
    for (const d of detach.splice(0)) d();
  };
  for (const s of sources) {
    if (s.aborted) {
      done();
      ac.abort(s.reason);
      break;
    }
    const on = () => {
      done();
      ac.abort(s.reason);
    };
    s.addEventListener("abort", on, { once: true });
    detach.push(() => s.removeEventListener("abort", on));
  }
  return { signal: ac.signal, done };
}

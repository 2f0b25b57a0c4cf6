/**
 * A few tries of a link call that may meet a peer restarting: the sidecar retries a claim
 * while the orchestrator comes back, and hands over late answers the same way. Backoff is
 * short and linear (`200 * attempt` ms) because a gateway is waiting on the result. An
 * orchestrator that answered that its store is down is not retried: it is up, and its store
 * will not be back within the call. A store outage a caller must outlast (a checkpoint's
 * invalidation, ../suspend/checkpoints.ts) is retried instead until a deadline, with pauses
 * that double up to a cap (`pauseAfter`, `untilDeadline`).
 */
import { isStoreUnavailable } from "../../shared/store-errors.js";

export async function withRetries<T>(call: () => Promise<T>, retryable: (err: unknown) => boolean, attempts = 3): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      if (attempt >= attempts || !retryable(err) || isStoreUnavailable(err)) throw err;
      await new Promise((r) => setTimeout(r, 200 * attempt).unref());
    }
  }
}

/** The pause before try `n + 1` of a call through an outage: doubling from 200 ms, at most 1 s. */
export const pauseAfter = (n: number) => Math.min(1_000, 200 * 2 ** Math.max(0, n - 1));

/** Resolves after `ms`, or at once when `signal` aborts; never keeps the process alive. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms).unref();
    signal?.addEventListener("abort", done, { once: true });
  });
}

/**
 * `call` tried again, after `pauseAfter` pauses, while it fails `retryable` and `untilMs` has
 * not passed (a store outage included); `tries` counts the failed tries.
 */
export async function untilDeadline<T>(call: () => Promise<T>, retryable: (err: unknown) => boolean, untilMs: number, tries = { n: 0 }): Promise<T> {
  for (;;) {
    try {
      return await call();
    } catch (err) {
      if (!retryable(err) || Date.now() >= untilMs) throw err;
      await sleep(pauseAfter(++tries.n));
    }
  }
}

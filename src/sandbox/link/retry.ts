/**
 * A few tries of a link call that may meet a peer restarting: the sidecar retries a claim
 * while the orchestrator comes back, and hands over late answers the same way. Backoff is
 * short and linear (`200 * attempt` ms) because a gateway is waiting on the result. An
 * orchestrator that answered that its store is down is not retried: it is up, and its store
 * will not be back within the call.
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

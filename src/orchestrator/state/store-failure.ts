/**
 * Turns a failed store call into a clear answer for the caller: when Redis cannot be
 * reached, times out or refuses, the call fails UNAVAILABLE with a message that names the
 * store (retry later), never an INTERNAL that hides what went wrong, and never an answer
 * that blames the gateway. No call waits on the store longer than its bound
 * (`--store-timeout-ms`); during an outage a call fails at once while the last failure is
 * under FAST_FAIL_MS old (the orchestrator's probe, which waits on the store, keeps it so). An outage is logged once when it starts
 * and once when it ends (`storeOutage`), and the orchestrator's health follows it.
 */
import { ServiceError } from "../../protocol/service-error.js";
import type { Logger } from "../../shared/logger.js";
import { STORE_UNAVAILABLE } from "../../shared/store-errors.js";

/** The default bound of one store call. */
export const DEFAULT_STORE_TIMEOUT_MS = 2_000;

/** Whether the store answers: down from the first call of an outage that failed until the next that succeeds. */
class StoreOutage {
  private downSince: number | undefined;
  /** When a call last found the store unreachable. */
  lastFailureAt = 0;
  private readonly listeners = new Set<(down: boolean) => void>();

  get down(): boolean {
    return this.downSince !== undefined;
  }

  failed(log: Logger, what: string, err: unknown): void {
    this.lastFailureAt = Date.now();
    if (this.downSince !== undefined) {
      log.debug({ err, op: what }, "store call failed; the store is still unreachable");
      return;
    }
    this.downSince = Date.now();
    log.error({ err, op: what }, "the orchestrator's store cannot be reached: calls that need it fail UNAVAILABLE until it is back");
    for (const l of this.listeners) l(true);
  }

  ok(log: Logger): void {
    if (this.downSince === undefined) return;
    const downMs = Date.now() - this.downSince;
    this.downSince = undefined;
    log.info({ downMs }, "the orchestrator's store is reachable again");
    for (const l of this.listeners) l(false);
  }

  onChange(listener: (down: boolean) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

/** The process's one view of its store's reachability (an orchestrator has one store setting). */
export const storeOutage = new StoreOutage();

let timeoutMs = DEFAULT_STORE_TIMEOUT_MS;

/** Sets the bound of every store call from now on (the orchestrator's `--store-timeout-ms`). */
export function setStoreTimeout(ms: number): void {
  timeoutMs = ms;
}

export function storeTimeoutMs(): number {
  return timeoutMs;
}

class StoreTimeout extends Error {
  override name = "StoreTimeout";
}

/** A reply of the store that refused the command itself (a script error): a bug, not an outage. */
const isReplyError = (err: unknown) => err instanceof Error && err.name === "ReplyError";

/** How long after a failed call other calls fail at once rather than wait the bound again. */
const FAST_FAIL_MS = 1_000;

/**
 * Runs `op` within the store's bound; `what` completes "could not …" in the log and the
 * error. In an outage, a call within FAST_FAIL_MS of the last failure fails at once, unless
 * it is a `probe`.
 */
export async function storeCall<T>(log: Logger, what: string, op: () => Promise<T>, options: { probe?: boolean } = {}): Promise<T> {
  if (storeOutage.down && !options.probe && Date.now() - storeOutage.lastFailureAt < FAST_FAIL_MS) {
    throw new ServiceError("unavailable", `${STORE_UNAVAILABLE}: could not ${what}; try again later`);
  }
  let timer: NodeJS.Timeout | undefined;
  try {
    const bound = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new StoreTimeout(`no answer within ${timeoutMs} ms`)), timeoutMs);
    });
    const value = await Promise.race([op(), bound]);
    storeOutage.ok(log);
    return value;
  } catch (err) {
    if (isReplyError(err)) log.error({ err, op: what }, "store call failed");
    else storeOutage.failed(log, what, err);
    throw new ServiceError("unavailable", `${STORE_UNAVAILABLE}: could not ${what}; try again later`);
  } finally {
    clearTimeout(timer);
  }
}

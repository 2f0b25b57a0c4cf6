/**
 * Turns a failed store call into a clear answer for the caller: when Redis cannot be
 * reached, times out or refuses, the call fails UNAVAILABLE (retry later), logged here
 * once with the error, instead of an INTERNAL that hides what went wrong.
 */
import { ServiceError } from "../../protocol/service-error.js";
import type { Logger } from "../../shared/logger.js";

/** Runs `op`; `what` completes "could not …" in the log and the error. */
export async function storeCall<T>(log: Logger, what: string, op: () => Promise<T>): Promise<T> {
  try {
    return await op();
  } catch (err) {
    log.error({ err, op: what }, "store call failed");
    throw new ServiceError("unavailable", `the orchestrator's store is unavailable: could not ${what}; try again later`);
  }
}

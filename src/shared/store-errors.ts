/**
 * How an orchestrator says its store cannot be reached, so a sidecar tells it apart from an
 * orchestrator that cannot be reached: the orchestrator is up and answered at once, so a
 * retry within the same call will not help, and the gateway and the model are told which.
 */
import { ServiceError } from "../protocol/service-error.js";

/** The start of every UNAVAILABLE an orchestrator returns for its store. */
export const STORE_UNAVAILABLE = "the orchestrator's store is unavailable";

export function isStoreUnavailable(err: unknown): boolean {
  return err instanceof ServiceError && err.code === "unavailable" && err.message.startsWith(STORE_UNAVAILABLE);
}

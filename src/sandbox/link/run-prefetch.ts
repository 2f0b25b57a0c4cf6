/**
 * Resolving a run the moment it is opened, when the orchestrator that opened it runs in
 * this process (`codemode start`, ../../shared/colocated.ts): this sidecar is the one that
 * will run it, and the gateway's first exec is still on its way (OpenRun's answer, then the
 * exec over the gateway's sandbox connection, often a new one).
 *
 * The resolve a run's first exec would start with is made now, through the usual path
 * (./run-resolver.ts): the answer is cached as an exec's would be, and an exec that arrives
 * while it is in flight waits for it instead of asking again. It is the same work, moved
 * earlier, so it is done only where its answer can be cached (the orchestrator tells of
 * opened runs only then). Nothing is recorded (no trajectory step, no counters); a failure
 * is logged at debug and the exec resolves the run itself. It does not prepare the
 * catalog's VM image as well (docs/performance-history.md#srcsandboxlinkrun-prefetchts says
 * why).
 */
import type { Logger } from "../../shared/logger.js";
import type { Scope } from "../../shared/scope.js";
import type { RunResolver } from "./run-resolver.js";

/** A listener for runs opened (../../shared/colocated.ts): each is resolved in the background. */
export function prefetchRuns(resolver: RunResolver, log: Logger): (scope: Scope) => void {
  return (scope) => {
    void resolver
      .resolve(scope)
      .catch((err: unknown) =>
        log.debug(
          { agentRunId: scope.agentRunId, reason: (err as Error).message },
          "resolving an opened run ahead of its first exec failed; the exec resolves it",
        ),
      );
  };
}

/**
 * An orchestrator in the same process as a sidecar attached to it (`codemode start`): what
 * the sidecar may hand it directly instead of encoding it for the link.
 *
 * Only segment records take this path: the one link message sent after every exec and
 * wait, whose cost in one process is the wire's, not the work's. A record handed over
 * joins the same queue as that sidecar's link messages, in the order sent, and only while
 * its link is up to this very orchestrator (its id, from the link's welcome): the link
 * still decides who the sidecar is, and everything else must still travel on it.
 *
 * The orchestrator also tells such a sidecar of each run it opened, when its sidecars may
 * cache resolved runs, so the sidecar resolves it while the gateway's first exec is on its
 * way (../sandbox/link/run-prefetch.ts); the resolve itself travels on the link.
 */
import type { RecordSegmentRequest } from "../gen/codemode/orchestrator/v1/link_pb.js";
import type { Scope } from "./scope.js";

export type ColocatedOrchestrator = {
  /** The orchestrator's id, as its link's welcome names it. */
  readonly orchestratorId: string;
  /**
   * Queues a segment record as though it had come on `sidecarId`'s open link (the
   * orchestrator takes ownership of `req`). False when no link of that sidecar is
   * attached here: the caller sends it on the wire.
   */
  record(sidecarId: string, req: RecordSegmentRequest): boolean;
  /**
   * Sets the one listener told of each run opened here (only while sidecars may cache
   * resolved runs), after OpenRun stored it and before the gateway hears back (undefined
   * removes it). It must return at once; what it throws is logged and dropped.
   */
  onRunOpened(listener: ((scope: Scope) => void) | undefined): void;
};

/**
 * Ends the claims of a sidecar that is gone. A wait holds its run by a claim, and so does a
 * VM whose run is checkpointed; each claim names the sidecar that holds it. When a
 * sidecar's link ends and it does not attach again within a short grace (a link that only
 * blinked comes back sooner), every tenant's store ends that sidecar's claims, so a wait on
 * another sidecar resumes those runs at once instead of after the claim's lease. A sidecar
 * that attaches again within the grace keeps them.
 */
import type { Logger } from "../../shared/logger.js";

/** How long a sidecar whose link ended may take to attach again before its claims are ended. */
export const CLAIM_RELEASE_GRACE_MS = 5_000;

export class ClaimRelease {
  private readonly timers = new Map<string, NodeJS.Timeout>();

  /** `release` ends the claims one sidecar holds, in every store, and says how many it ended. */
  constructor(
    private readonly release: (sidecarId: string) => Promise<number>,
    private readonly log: Logger,
    private readonly graceMs = CLAIM_RELEASE_GRACE_MS,
  ) {}

  /** The sidecar attached (again): its claims stay. */
  attached(sidecarId: string): void {
    clearTimeout(this.timers.get(sidecarId));
    this.timers.delete(sidecarId);
  }

  /** The sidecar's link ended: unless it attaches again within the grace, its claims end. */
  detached(sidecarId: string): void {
    clearTimeout(this.timers.get(sidecarId));
    const timer = setTimeout(() => {
      this.timers.delete(sidecarId);
      this.release(sidecarId).then(
        (n) => {
          if (n > 0) this.log.info({ sidecarId, claims: n }, "released the claims of a sidecar that did not come back: waits elsewhere may resume its runs");
        },
        (err: unknown) => this.log.warn({ err, sidecarId }, "could not release the claims of a sidecar that did not come back; they end with their lease"),
      );
    }, this.graceMs);
    timer.unref();
    this.timers.set(sidecarId, timer);
  }

  close(): void {
    for (const t of this.timers.values()) clearTimeout(t);
    this.timers.clear();
  }
}

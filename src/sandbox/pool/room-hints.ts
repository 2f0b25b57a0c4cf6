/**
 * Which sessions' execs should start on a grown VM instance.
 *
 * A worker keeps, beside instances of its images' exact size, one instance a run grew
 * (../worker/warm-vms.ts, ../worker/grown-images.ts): a run that needs a large heap (a big
 * tool answer parsed into thousands of objects) starts there with the room already owned by
 * its allocator. But resetting a grown instance writes all of its memory, so a small
 * program should never take it. Which execs need room is not known before they run; the
 * session is the best guess (an agent calls the same tools again). When a session's exec
 * grows its instance, its next ROOMY_EXECS execs ask for a grown instance; any other exec
 * takes an image-sized one, a new one if none is idle.
 */
import { LRUCache } from "lru-cache";

/** Execs of a session that ask for room after one of its execs grew its instance. */
export const ROOMY_EXECS = 8;
/** Sessions remembered at most. */
const SESSIONS = 10_000;

export class RoomHints {
  private readonly left = new LRUCache<string, number>({ max: SESSIONS });

  /** `tenant`'s exec grew its instance: its next ROOMY_EXECS execs ask for a grown one. */
  grew(tenant: string): void {
    this.left.set(tenant, ROOMY_EXECS);
  }

  /** Whether `tenant`'s exec about to start should ask for a grown instance (counted down). */
  take(tenant: string): boolean {
    const n = this.left.get(tenant);
    if (n === undefined) return false;
    if (n <= 1) this.left.delete(tenant);
    else this.left.set(tenant, n - 1);
    return true;
  }
}

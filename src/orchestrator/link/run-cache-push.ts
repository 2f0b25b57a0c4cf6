/**
 * Keeps sidecars' cached ResolveRun answers true. A sidecar caches a resolved run (config,
 * catalog view, counters) so an exec does not pay a round trip here; this orchestrator
 * remembers which attached sidecar resolved which run, and when a run changes it tells
 * exactly those sidecars to drop it, over their standing Attach streams.
 *
 * A change the gateway made (OpenRun again, CloseRun, the namespace registry) is answered
 * only after every sidecar told acked, so the gateway's next exec sees it whichever sidecar
 * serves it. A sidecar that does not ack in time is disconnected: it drops its whole cache
 * whenever its link goes down, so it cannot keep serving the old run. Counter changes
 * recorded by one sidecar are pushed to the other holders without waiting (per-run caps are
 * checked against counters at most one segment old there). Caching is offered only when
 * this process owns the run state (the in-memory store): with a shared store, another
 * orchestrator may change a run without this one knowing.
 */
import { randomUUID } from "node:crypto";
import type { Scope } from "../../shared/scope.js";
import { scopeKeyOf } from "../../shared/scope.js";

export type InvalidateMessage = { requestId: string; scopes: Scope[]; all: boolean };

type Holder = { send(m: InvalidateMessage): void; disconnect(reason: string): void };

/** How long a change waits for the sidecars' acks before disconnecting the silent ones. */
const ACK_DEADLINE_MS = 2_000;

export class RunCachePush {
  private readonly sidecars = new Map<string, Holder>();
  /** Scope key → the sidecars that may hold it cached, with the scope itself. */
  private readonly holders = new Map<string, { scope: Scope; sidecars: Set<string> }>();
  private readonly waiting = new Map<string, { pending: Set<string>; done(): void }>();

  constructor(readonly cacheable: boolean) {}

  attach(sidecarId: string, holder: Holder): void {
    this.sidecars.set(sidecarId, holder);
  }

  detach(sidecarId: string): void {
    this.sidecars.delete(sidecarId);
    for (const [key, h] of this.holders) {
      h.sidecars.delete(sidecarId);
      if (h.sidecars.size === 0) this.holders.delete(key);
    }
    for (const w of this.waiting.values()) if (w.pending.delete(sidecarId) && w.pending.size === 0) w.done();
  }

  /** A sidecar resolved a run and was allowed to cache it. */
  resolved(sidecarId: string, scope: Scope): void {
    if (!this.cacheable || !this.sidecars.has(sidecarId)) return;
    const key = scopeKeyOf(scope);
    let h = this.holders.get(key);
    if (!h) this.holders.set(key, (h = { scope, sidecars: new Set() }));
    h.sidecars.add(sidecarId);
  }

  /** True when `sidecarId` is attached here (only then may it cache). */
  isAttached(sidecarId: string): boolean {
    return this.sidecars.has(sidecarId);
  }

  ack(requestId: string, sidecarId: string): void {
    const w = this.waiting.get(requestId);
    if (w?.pending.delete(sidecarId) && w.pending.size === 0) w.done();
  }

  /**
   * Tells the sidecars holding `scope` (or, for "all", every attached sidecar) to drop it,
   * except `exceptSidecar`; resolves when all acked, disconnecting those that did not in time.
   */
  async invalidate(scope: Scope | "all", options: { exceptSidecar?: string; awaitAcks?: boolean } = {}): Promise<void> {
    if (!this.cacheable) return;
    let targets: string[];
    let scopes: Scope[] = [];
    if (scope === "all") {
      targets = [...this.sidecars.keys()];
      this.holders.clear();
    } else {
      const key = scopeKeyOf(scope);
      const h = this.holders.get(key);
      if (!h) return;
      targets = [...h.sidecars];
      scopes = [h.scope];
      if (options.exceptSidecar !== undefined && h.sidecars.has(options.exceptSidecar)) h.sidecars = new Set([options.exceptSidecar]);
      else this.holders.delete(key);
    }
    targets = targets.filter((id) => id !== options.exceptSidecar && this.sidecars.has(id));
    if (targets.length === 0) return;
    const requestId = randomUUID();
    const message = { requestId, scopes, all: scope === "all" };
    if (options.awaitAcks === false) {
      for (const id of targets) this.sidecars.get(id)?.send(message);
      return;
    }
    await new Promise<void>((resolve) => {
      const pending = new Set(targets);
      const timer = setTimeout(() => {
        this.waiting.delete(requestId);
        for (const id of pending) this.sidecars.get(id)?.disconnect(`it did not ack a run cache invalidation within ${ACK_DEADLINE_MS} ms`);
        resolve();
      }, ACK_DEADLINE_MS);
      timer.unref();
      this.waiting.set(requestId, {
        pending,
        done: () => {
          clearTimeout(timer);
          this.waiting.delete(requestId);
          resolve();
        },
      });
      for (const id of targets) this.sidecars.get(id)?.send(message);
    });
  }
}

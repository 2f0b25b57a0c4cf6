/**
 * Keeps sidecars' cached ResolveRun answers true. A sidecar caches a resolved run (config,
 * catalog view, counters) so an exec does not pay a round trip here; this orchestrator
 * remembers which attached sidecar resolved which run, and when a run changes it tells
 * exactly those sidecars to drop it, over their standing Attach streams. With a shared
 * (Redis) store every change also goes to the other replicas, which tell their own sidecars
 * (./run-cache-bus.ts); caching is offered only while this replica is sure to hear them.
 *
 * A change the gateway made (OpenRun again, CloseRun, the namespace registry) is answered
 * only after every sidecar told acked; one that does not ack in time is disconnected (it
 * drops its whole cache whenever its link goes down). Counter changes recorded by one
 * sidecar are pushed to the other holders without waiting (per-run caps are checked against
 * counters at most one segment old there). What did not change the runs (counters, this
 * replica's trust) lets a sidecar keep them for a store outage, and keeps it their holder.
 */
import { randomUUID } from "node:crypto";
import type { Scope } from "../../shared/scope.js";
import { scopeKeyOf } from "../../shared/scope.js";
import type { RunCacheBus } from "./run-cache-bus.js";

export type InvalidateMessage = { requestId: string; scopes: Scope[]; all: boolean; keepForOutage: boolean };

/**
 * `keepForOutage`: the runs did not change (their counters moved, or this replica may miss
 * changes from now on): their holders may keep them for a store outage, and stay holders.
 */
type PushOptions = { exceptSidecar?: string; awaitAcks?: boolean; keepForOutage?: boolean };

type Holder = { send(m: InvalidateMessage): void; disconnect(reason: string): void };

/** How long a change waits for the sidecars' acks before disconnecting the silent ones. */
const ACK_DEADLINE_MS = 2_000;

export class RunCachePush {
  private readonly sidecars = new Map<string, Holder>();
  /** Scope key → the sidecars that may hold it (cached, or as their outage fallback), with the scope itself. */
  private readonly holders = new Map<string, { scope: Scope; sidecars: Set<string> }>();
  private readonly waiting = new Map<string, { pending: Set<string>; done(): void }>();

  /** `bus`: the other replicas on a shared store; none when this process owns the run state (in memory). */
  constructor(private readonly bus?: RunCacheBus) {
    if (!bus) return;
    bus.apply = async (inv) => {
      const options = {
        awaitAcks: inv.awaitAcks,
        keepForOutage: inv.keepForOutage === true,
        ...(inv.exceptSidecar !== undefined ? { exceptSidecar: inv.exceptSidecar } : {}),
      };
      if (inv.all) return this.push("all", options);
      await Promise.all(inv.scopes.map((scope) => this.push(scope, options)));
    };
    // A change may be missed from now on: what the sidecars cached is kept only for a store outage (in which nothing changes).
    bus.onUnsure = () => void this.push("all", { keepForOutage: true });
    // A change may have been missed meanwhile: nothing the sidecars held is kept.
    bus.onSureAgain = () => void this.push("all", {});
  }

  /** Whether sidecars may cache a resolved run now. */
  get cacheable(): boolean {
    return this.bus?.sure ?? true;
  }

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
   * except `exceptSidecar`, here and on every other replica; resolves when all acked (unless
   * `awaitAcks` is false), disconnecting those that did not in time.
   */
  async invalidate(scope: Scope | "all", options: PushOptions = {}): Promise<void> {
    const local = this.push(scope, options);
    if (!this.bus) return local;
    await Promise.all([local, this.publish(scope, options)]);
  }

  private publish(scope: Scope | "all", options: PushOptions): Promise<void> {
    return (
      this.bus?.publish({
        scopes: scope === "all" ? [] : [scope],
        all: scope === "all",
        awaitAcks: options.awaitAcks !== false,
        ...(options.keepForOutage ? { keepForOutage: true } : {}),
        ...(options.exceptSidecar !== undefined ? { exceptSidecar: options.exceptSidecar } : {}),
      }) ?? Promise.resolve()
    );
  }

  /**
   * For a write of run state that failed: a store that timed out may still run it later, so
   * the change is published anyway, behind the write on its connection, and every replica
   * (this one too) tells its sidecars if it lands. Nothing is pushed now: the run is as it
   * was, and what the sidecars keep for the outage stays true. Rethrows the write's error.
   */
  failedWrite(scope: Scope | "all", options: Omit<PushOptions, "awaitAcks"> = {}): (err: unknown) => never {
    return (err) => {
      void this.publish(scope, { ...options, awaitAcks: false }).catch(() => undefined);
      throw err;
    };
  }

  /** Tells this replica's sidecars (those holding `scope`, or all) to drop it. */
  private async push(scope: Scope | "all", options: PushOptions): Promise<void> {
    let targets: string[];
    let scopes: Scope[] = [];
    if (scope === "all") {
      targets = [...this.sidecars.keys()];
      // Kept for an outage, what they cached is still theirs; otherwise they hold nothing now.
      if (!options.keepForOutage) this.holders.clear();
    } else {
      const key = scopeKeyOf(scope);
      const h = this.holders.get(key);
      if (!h) return;
      targets = [...h.sidecars];
      scopes = [h.scope];
      if (options.keepForOutage) {
        // They keep it for a store outage: still its holders.
      } else if (options.exceptSidecar !== undefined && h.sidecars.has(options.exceptSidecar)) h.sidecars = new Set([options.exceptSidecar]);
      else this.holders.delete(key);
    }
    targets = targets.filter((id) => id !== options.exceptSidecar && this.sidecars.has(id));
    if (targets.length === 0) return;
    const requestId = randomUUID();
    const message = { requestId, scopes, all: scope === "all", keepForOutage: options.keepForOutage === true };
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

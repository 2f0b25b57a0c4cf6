/**
 * Keeps sidecars' cached ResolveRun answers true. A sidecar caches a resolved run so an exec
 * pays no round trip here; this orchestrator remembers which attached sidecar resolved which
 * run, and when a run changes (or a tenant's runs: its namespaces) it tells exactly their
 * holders, naming to each the runs it holds, over their standing Attach streams. With a shared
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
import { scopeKeyOf, tenantOfScope } from "../../shared/scope.js";
import type { RunCacheBus } from "./run-cache-bus.js";

export type InvalidateMessage = { requestId: string; scopes: Scope[]; all: boolean; keepForOutage: boolean };

/** Every run of one tenant (its namespaces changed); the default tenant's are every run of a deployment without tenants. */
export type TenantRuns = { tenant: string };

/** What an invalidation drops: one run, every run of a tenant, or every run. */
export type Runs = Scope | TenantRuns | "all";

/** True for a tenant's runs, as opposed to one run (a scope names its gateway run). */
export function isTenantRuns(runs: Scope | TenantRuns): runs is TenantRuns {
  return !("agentRunId" in runs);
}

/**
 * `keepForOutage`: the runs did not change (their counters moved, or this replica may miss
 * changes from now on): their holders may keep them for a store outage, and stay holders.
 */
type PushOptions = { exceptSidecar?: string; awaitAcks?: boolean; keepForOutage?: boolean };

type Holder = { send(m: InvalidateMessage): void; disconnect(reason: string): void };

/** How long a change waits for the sidecars' acks before disconnecting the silent ones. */
const ACK_DEADLINE_MS = 2_000;
/** At most this many scopes in one message to a sidecar (a tenant's runs go in several). */
export const MAX_SCOPES_PER_MESSAGE = 1_000;

/** One message of a push: the same scopes (or every run) to each of `sidecars`. */
type Batch = { sidecars: string[]; scopes: Scope[]; all: boolean };

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
      if (inv.all) return this.push(inv.tenant !== undefined ? { tenant: inv.tenant } : "all", options);
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
   * Tells the sidecars holding `runs` (a run, a tenant's runs; for "all", every attached
   * sidecar) to drop them, except `exceptSidecar`, here and on every other replica; resolves
   * when all acked (unless `awaitAcks` is false), disconnecting those that did not in time.
   */
  async invalidate(runs: Runs, options: PushOptions = {}): Promise<void> {
    const local = this.push(runs, options);
    if (!this.bus) return local;
    await Promise.all([local, this.publish(runs, options)]);
  }

  private publish(runs: Runs, options: PushOptions): Promise<void> {
    // A tenant's runs go as every run, of that tenant: a replica of a build that reads no tenant drops every run.
    const what =
      runs === "all" ? { scopes: [], all: true } : isTenantRuns(runs) ? { scopes: [], all: true, tenant: tenantOfScope(runs) } : { scopes: [runs], all: false };
    return (
      this.bus?.publish({
        ...what,
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
  failedWrite(runs: Runs, options: Omit<PushOptions, "awaitAcks"> = {}): (err: unknown) => never {
    return (err) => {
      void this.publish(runs, { ...options, awaitAcks: false }).catch(() => undefined);
      throw err;
    };
  }

  /** Tells this replica's sidecars (those holding `runs`, or all) to drop them. */
  private push(runs: Runs, options: PushOptions): Promise<void> {
    if (runs === "all") {
      // Kept for an outage, what they cached is still theirs; otherwise they hold nothing now.
      if (!options.keepForOutage) this.holders.clear();
      return this.deliver([{ sidecars: [...this.sidecars.keys()], scopes: [], all: true }], options);
    }
    if (isTenantRuns(runs)) return this.deliver(this.release(tenantOfScope(runs), options), options);
    const key = scopeKeyOf(runs);
    const h = this.holders.get(key);
    if (!h) return Promise.resolve();
    const batch = { sidecars: [...h.sidecars], scopes: [h.scope], all: false };
    this.forget(key, h, options);
    return this.deliver([batch], options);
  }

  /**
   * The messages naming to each sidecar the runs of `tenant` it holds (no other tenant's
   * run is named, so none is dropped), which it no longer holds after them (see forget).
   */
  private release(tenant: string, options: PushOptions): Batch[] {
    const bySidecar = new Map<string, Scope[]>();
    for (const [key, h] of this.holders) {
      if (tenantOfScope(h.scope) !== tenant) continue;
      for (const id of h.sidecars) {
        const scopes = bySidecar.get(id);
        if (scopes) scopes.push(h.scope);
        else bySidecar.set(id, [h.scope]);
      }
      this.forget(key, h, options);
    }
    const batches: Batch[] = [];
    for (const [id, scopes] of bySidecar)
      for (let i = 0; i < scopes.length; i += MAX_SCOPES_PER_MESSAGE)
        batches.push({ sidecars: [id], scopes: scopes.slice(i, i + MAX_SCOPES_PER_MESSAGE), all: false });
    return batches;
  }

  /** The holders of a run once they were told it changed: kept for an outage, they still hold it; else only `exceptSidecar` may. */
  private forget(key: string, h: { sidecars: Set<string> }, options: PushOptions): void {
    if (options.keepForOutage) return;
    if (options.exceptSidecar !== undefined && h.sidecars.has(options.exceptSidecar)) h.sidecars = new Set([options.exceptSidecar]);
    else this.holders.delete(key);
  }

  /** Sends each batch to its attached sidecars (but `exceptSidecar`); unless `awaitAcks` is false, resolves once all acked or were disconnected. */
  private async deliver(batches: Batch[], options: PushOptions): Promise<void> {
    const keepForOutage = options.keepForOutage === true;
    const sends = batches.flatMap((b) => {
      const targets = b.sidecars.filter((id) => id !== options.exceptSidecar && this.sidecars.has(id));
      return targets.length === 0 ? [] : [{ targets, message: { requestId: randomUUID(), scopes: b.scopes, all: b.all, keepForOutage } }];
    });
    if (sends.length === 0) return;
    if (options.awaitAcks === false) {
      for (const { targets, message } of sends) for (const id of targets) this.sidecars.get(id)?.send(message);
      return;
    }
    await new Promise<void>((resolve) => {
      let left = sends.length;
      const timer = setTimeout(() => {
        const silent = new Set<string>();
        for (const { message } of sends) {
          for (const id of this.waiting.get(message.requestId)?.pending ?? []) silent.add(id);
          this.waiting.delete(message.requestId);
        }
        for (const id of silent) this.sidecars.get(id)?.disconnect(`it did not ack a run cache invalidation within ${ACK_DEADLINE_MS} ms`);
        resolve();
      }, ACK_DEADLINE_MS);
      timer.unref();
      for (const { targets, message } of sends) {
        const { requestId } = message;
        this.waiting.set(requestId, {
          pending: new Set(targets),
          done: () => {
            this.waiting.delete(requestId);
            if (--left > 0) return;
            clearTimeout(timer);
            resolve();
          },
        });
      }
      for (const { targets, message } of sends) for (const id of targets) this.sidecars.get(id)?.send(message);
    });
  }
}

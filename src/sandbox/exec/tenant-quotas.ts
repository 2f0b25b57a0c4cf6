/**
 * The quotas a sidecar enforces on its own, per tenant (../../shared/tenants.ts): how many
 * execs and waits a tenant has in flight here (`maxConcurrentExecs`), and how fast it starts
 * execs here (`execsPerSecond`, a token bucket holding one second's worth, at least one
 * exec). Both are local: N sidecars admit N times as much, and the docs say so. Past one,
 * the call is RESOURCE_EXHAUSTED before anything runs, naming the quota and when to retry;
 * the other tenants are not touched. What is in flight, and each refusal, are there for the
 * metrics. Without a tenants file nothing is limited or counted here.
 */
import { ServiceError } from "../../protocol/service-error.js";
import type { Tenants } from "../../shared/tenants.js";

export type LocalQuota = "maxConcurrentExecs" | "execsPerSecond";

type Bucket = { tokens: number; at: number };

const NOTHING = () => undefined;

export class TenantQuotas {
  private readonly inFlight = new Map<string, number>();
  private readonly buckets = new Map<string, Bucket>();
  /** Told of each refusal (metrics). */
  onRefused: ((tenant: string, quota: LocalQuota) => void) | undefined;

  constructor(private readonly tenants: Tenants) {}

  /** Execs and waits of `tenant` in flight here. */
  running(tenant: string): number {
    return this.inFlight.get(tenant) ?? 0;
  }

  /**
   * Admits an exec (`starts`: it counts against execsPerSecond) or a wait of `tenant`, or
   * throws RESOURCE_EXHAUSTED; the admitted call is counted in flight until `release`
   * (idempotent) is called.
   */
  admit(tenant: string, starts: boolean): () => void {
    if (!this.tenants.configured) return NOTHING;
    const q = this.tenants.quotas(tenant);
    const n = this.running(tenant);
    if (q.maxConcurrentExecs !== undefined && n >= q.maxConcurrentExecs) {
      throw this.refuse(
        tenant,
        "maxConcurrentExecs",
        `tenant ${JSON.stringify(tenant)} has ${n} execs and waits in flight on this sidecar, its quota maxConcurrentExecs (${q.maxConcurrentExecs}); retry when one of them ends, or on another sidecar`,
      );
    }
    if (starts && q.execsPerSecond !== undefined) {
      const waitMs = this.take(tenant, q.execsPerSecond);
      if (waitMs > 0) {
        throw this.refuse(
          tenant,
          "execsPerSecond",
          `tenant ${JSON.stringify(tenant)} is over its quota execsPerSecond (${q.execsPerSecond} per second on this sidecar); retry in ${waitMs} ms`,
        );
      }
    }
    this.inFlight.set(tenant, n + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = this.running(tenant) - 1;
      if (left > 0) this.inFlight.set(tenant, left);
      else this.inFlight.delete(tenant);
    };
  }

  /** Takes a token from the tenant's bucket: 0, or how many ms until one is there (none taken). */
  private take(tenant: string, rate: number): number {
    const capacity = Math.max(1, rate);
    const now = performance.now();
    const b = this.buckets.get(tenant) ?? { tokens: capacity, at: now };
    b.tokens = Math.min(capacity, b.tokens + ((now - b.at) * rate) / 1000);
    b.at = now;
    this.buckets.set(tenant, b);
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return 0;
    }
    return Math.max(1, Math.ceil(((1 - b.tokens) * 1000) / rate));
  }

  private refuse(tenant: string, quota: LocalQuota, message: string): ServiceError {
    this.onRefused?.(tenant, quota);
    return new ServiceError("resource_exhausted", message);
  }
}

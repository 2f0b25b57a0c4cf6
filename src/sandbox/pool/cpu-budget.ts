/**
 * A fair share of the pool's CPU per session (its agent id and session key, `tenantOf`).
 * Each segment's VM reports how long it held its worker thread; a session that held more
 * than SHARE of the pool's thread time over the last window is refused new execs while
 * other sessions have work (RESOURCE_EXHAUSTED, with when to retry), so a busy-looping one
 * keeps at most its share; with the pool otherwise idle, nobody is refused. With a tenants
 * file, the tenants (../../shared/tenants.ts) share the pool by weight the same way, their
 * sessions sharing their tenant's part. The sidecar's own work (start-up probes, surface
 * warm-ups: INTERNAL_TENANT) is nobody's: neither charged nor counted as work waiting.
 */
import { testKnobMs } from "../../shared/limits.js";
import { DEFAULT_TENANT } from "../../shared/scope.js";

/** The tenant of the sidecar's own tasks (./pool-start.ts): no session is "". */
export const INTERNAL_TENANT = "";

/** The sliding window the share is measured over. */
export const WINDOW_MS = 10_000;
/**
 * The window a test may set instead (CODEMODE_TEST_CPU_SHARE_WINDOW_MS, clamped to 1 s to
 * 10 min), so a test of the share does not run ten seconds of loops to exceed it. A test
 * knob, not config: the window and SHARE together are the fairness the product promises
 * (and the scheduler's heavy-session test reads the same window), not a setting to tune.
 */
export const WINDOW_LIMIT = { default: WINDOW_MS, min: 1_000, max: 600_000 } as const;
export function cpuShareWindowMs(env: NodeJS.ProcessEnv = process.env): number {
  return testKnobMs("CODEMODE_TEST_CPU_SHARE_WINDOW_MS", WINDOW_LIMIT, env);
}
/** The share of the pool's thread time one session may hold over the window. */
export const SHARE = 0.4;

type Charge = { at: number; ms: number };
/**
 * A key's charges within the window, oldest first from `head` (the ones before it expired),
 * and their running sum. Expired charges are cut off only once they are half the list, so
 * a session charged on every exec pays O(1) a query, not a move of the whole window's list.
 */
type Charges = { list: Charge[]; head: number; sum: number };

/**
 * What starts the session key of a tenant other than the default one, and ends its name: a
 * lone surrogate, which no id decoded from the wire (UTF-8) can hold, so a gateway's agent id
 * cannot pose as another tenant.
 */
const TENANT_MARK = "\uD800";

/** The tenant (of a tenants file) a session key of `tenantOf` belongs to. */
export function tenantGroupOf(session: string): string {
  if (!session.startsWith(TENANT_MARK)) return DEFAULT_TENANT;
  const end = session.indexOf(TENANT_MARK, 1);
  return end < 0 ? DEFAULT_TENANT : session.slice(1, end);
}

/** A tenant's own key among the sessions' (it cannot be a session's: one mark, not two). */
const groupKey = (tenant: string) => TENANT_MARK + tenant;

export class CpuBudget {
  /** Each session's (and, with weights, each tenant's) charges within the window. */
  private readonly charges = new Map<string, Charges>();
  private readonly active = new Map<string, number>();
  private activeTotal = 0;
  /** Each tenant's segments under way (only with weights: a tenants file). */
  private readonly groupActive = new Map<string, number>();
  /** A tenant's weight; undefined while there are no tenants to share between. */
  private weightOf: ((tenant: string) => number) | undefined;

  constructor(
    private readonly threads: number,
    /** The sliding window (ms) the share is measured over. */
    readonly windowMs: number = WINDOW_MS,
  ) {}

  /** Thread time (ms) one session may hold over the window. */
  get budgetMs(): number {
    return this.windowMs * this.threads * SHARE;
  }

  /** Shares the pool between tenants by `weightOf` too (a tenants file); without it, only between sessions. */
  setWeights(weightOf: (tenant: string) => number): void {
    this.weightOf = weightOf;
  }

  started(tenant: string): void {
    if (tenant === INTERNAL_TENANT) return;
    this.active.set(tenant, (this.active.get(tenant) ?? 0) + 1);
    this.activeTotal++;
    if (this.weightOf) {
      const g = groupKey(tenantGroupOf(tenant));
      this.groupActive.set(g, (this.groupActive.get(g) ?? 0) + 1);
    }
  }

  /** A segment of `tenant` ended, having held a thread for `ms`. */
  ended(tenant: string, ms: number): void {
    if (tenant === INTERNAL_TENANT) return;
    const n = (this.active.get(tenant) ?? 1) - 1;
    if (n > 0) this.active.set(tenant, n);
    else this.active.delete(tenant);
    this.activeTotal--;
    const g = this.weightOf ? groupKey(tenantGroupOf(tenant)) : undefined;
    if (g !== undefined) {
      const left = (this.groupActive.get(g) ?? 1) - 1;
      if (left > 0) this.groupActive.set(g, left);
      else this.groupActive.delete(g);
    }
    if (ms <= 0) return;
    this.charge(tenant, ms);
    if (g !== undefined) this.charge(g, ms);
  }

  private charge(key: string, ms: number): void {
    const c = this.charges.get(key);
    if (c) {
      c.list.push({ at: Date.now(), ms });
      c.sum += ms;
    } else this.charges.set(key, { list: [{ at: Date.now(), ms }], head: 0, sum: ms });
  }

  /** `key`'s charges still within the window at `now`, the expired ones dropped; undefined when none is. */
  private live(key: string, now = Date.now()): Charges | undefined {
    const c = this.charges.get(key);
    if (!c) return undefined;
    const { list } = c;
    while (c.head < list.length && list[c.head]!.at <= now - this.windowMs) c.sum -= list[c.head++]!.ms;
    if (c.head === list.length) {
      this.charges.delete(key);
      return undefined;
    }
    if (c.head >= 32 && c.head * 2 >= list.length) {
      list.splice(0, c.head);
      c.head = 0;
    }
    return c;
  }

  /**
   * When enough of `key`'s charges will have expired to take `over` ms off its use (`now`,
   * when none is left). `now` is the instant `over` was computed at, so both see the same charges.
   */
  private underAt(key: string, over: number, now: number): number {
    const c = this.live(key, now);
    let retryAt = now;
    if (!c) return retryAt;
    for (let i = c.head; i < c.list.length; i++) {
      retryAt = c.list[i]!.at + this.windowMs;
      over -= c.list[i]!.ms;
      if (over < 0) break;
    }
    return retryAt;
  }

  /** Thread time a tenant's sessions held within the window (0 without weights). */
  tenantUsedMs(tenant: string): number {
    return this.weightOf ? this.usedMs(groupKey(tenant)) : 0;
  }

  /**
   * The scheduler's order between tenants: the thread time a session's tenant held within
   * the window per unit of its weight (0 for every session without tenants).
   */
  tenantRank(session: string): number {
    if (!this.weightOf || session === INTERNAL_TENANT) return 0;
    const tenant = tenantGroupOf(session);
    return this.usedMs(groupKey(tenant)) / this.weightOf(tenant);
  }

  /** Thread time `tenant` held within the window (amortized O(1): the scheduler asks often). */
  usedMs(tenant: string, now = Date.now()): number {
    return this.live(tenant, now)?.sum ?? 0;
  }

  /** Why `tenant` may not start a segment now (over its share while others have work), or undefined. */
  refusal(tenant: string): string | undefined {
    const now = Date.now();
    const used = this.usedMs(tenant, now);
    if (used <= this.budgetMs) return undefined;
    const others = this.activeTotal - (this.active.get(tenant) ?? 0);
    if (others <= 0) return undefined;
    // When enough of the window's charges expire to bring the session back under its share.
    const retryAt = this.underAt(tenant, used - this.budgetMs, now);
    const seconds = Math.max(1, Math.ceil((retryAt - now) / 1000));
    return `this session's programs held the sandbox's threads for ${Math.round(used)} ms in the last ${this.windowMs / 1000} s, more than its share (${this.budgetMs} ms) while other sessions wait; retry in ${seconds} s`;
  }

  /**
   * Why a session of a tenant over its share by weight may not start a segment now, or
   * undefined: the tenant's part of the pool's thread time over the window is its weight
   * over the weights of the tenants with work here (its own included); past it, while
   * another tenant has work, its sessions are refused.
   */
  tenantRefusal(session: string): string | undefined {
    const weightOf = this.weightOf;
    if (!weightOf || session === INTERNAL_TENANT) return undefined;
    const tenant = tenantGroupOf(session);
    const own = groupKey(tenant);
    let weights = weightOf(tenant);
    let others = 0;
    for (const [g, n] of this.groupActive) {
      if (g === own || n <= 0) continue;
      others++;
      weights += weightOf(g.slice(TENANT_MARK.length));
    }
    if (others === 0) return undefined;
    const share = this.windowMs * this.threads * (weightOf(tenant) / weights);
    const now = Date.now();
    const used = this.usedMs(own, now);
    if (used <= share) return undefined;
    const retryAt = this.underAt(own, used - share, now);
    const seconds = Math.max(1, Math.ceil((retryAt - now) / 1000));
    return `tenant ${JSON.stringify(tenant)}'s programs held the sandbox's threads for ${Math.round(used)} ms in the last ${this.windowMs / 1000} s, more than its share by its quota weight (${Math.round(share)} ms: weight ${weightOf(tenant)} of ${weights} among the tenants with work here) while other tenants wait; retry in ${seconds} s`;
  }
}

/** The session a scope belongs to, the unit of the CPU share; a tenant other than the default one leads it (`tenantGroupOf`). */
export function tenantOf(scope: { agentId: string; sessionKey: string; tenant?: string }): string {
  const session = `${scope.agentId}\u0000${scope.sessionKey}`;
  return scope.tenant === undefined || scope.tenant === DEFAULT_TENANT ? session : `${TENANT_MARK}${scope.tenant}${TENANT_MARK}${session}`;
}

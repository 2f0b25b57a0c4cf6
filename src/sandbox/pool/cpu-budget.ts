/**
 * A fair share of the pool's CPU per session (tenant: agent id and session key). Each
 * segment's VM reports how long it held its worker thread; a session that held more than
 * SHARE of the pool's thread time over the last window is refused new execs while other
 * sessions have work on the pool (RESOURCE_EXHAUSTED, with when to retry). A busy-looping
 * tenant then keeps at most its share, and the others' execs are not queued behind it;
 * with the pool otherwise idle, nobody is refused. The sidecar's own work (its start-up
 * probes and surface warm-ups, INTERNAL_TENANT) is nobody's session: it is neither charged
 * nor counted as another session waiting, so a warm-up that starts while a busy session
 * pauses between execs cannot get that session refused.
 */
import { testKnobMs } from "../../shared/limits.js";

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

export class CpuBudget {
  /** Each session's charges within the window, oldest first, and their running sum. */
  private readonly charges = new Map<string, Charge[]>();
  private readonly sums = new Map<string, number>();
  private readonly active = new Map<string, number>();
  private activeTotal = 0;

  constructor(
    private readonly threads: number,
    /** The sliding window (ms) the share is measured over. */
    readonly windowMs: number = WINDOW_MS,
  ) {}

  /** Thread time (ms) one session may hold over the window. */
  get budgetMs(): number {
    return this.windowMs * this.threads * SHARE;
  }

  started(tenant: string): void {
    if (tenant === INTERNAL_TENANT) return;
    this.active.set(tenant, (this.active.get(tenant) ?? 0) + 1);
    this.activeTotal++;
  }

  /** A segment of `tenant` ended, having held a thread for `ms`. */
  ended(tenant: string, ms: number): void {
    if (tenant === INTERNAL_TENANT) return;
    const n = (this.active.get(tenant) ?? 1) - 1;
    if (n > 0) this.active.set(tenant, n);
    else this.active.delete(tenant);
    this.activeTotal--;
    if (ms <= 0) return;
    const list = this.charges.get(tenant) ?? [];
    list.push({ at: Date.now(), ms });
    this.charges.set(tenant, list);
    this.sums.set(tenant, (this.sums.get(tenant) ?? 0) + ms);
  }

  /** Thread time `tenant` held within the window (amortized O(1): the scheduler asks often). */
  usedMs(tenant: string, now = Date.now()): number {
    const list = this.charges.get(tenant);
    if (!list) return 0;
    let sum = this.sums.get(tenant) ?? 0;
    let expired = 0;
    while (expired < list.length && list[expired]!.at <= now - this.windowMs) sum -= list[expired++]!.ms;
    if (expired === list.length) {
      this.charges.delete(tenant);
      this.sums.delete(tenant);
      return 0;
    }
    if (expired > 0) {
      list.splice(0, expired);
      this.sums.set(tenant, sum);
    }
    return sum;
  }

  /** Why `tenant` may not start a segment now (over its share while others have work), or undefined. */
  refusal(tenant: string): string | undefined {
    const used = this.usedMs(tenant);
    if (used <= this.budgetMs) return undefined;
    const others = this.activeTotal - (this.active.get(tenant) ?? 0);
    if (others <= 0) return undefined;
    const list = this.charges.get(tenant)!;
    // When enough of the window's charges expire to bring the session back under its share.
    let over = used - this.budgetMs;
    let retryAt = Date.now();
    for (const c of list) {
      retryAt = c.at + this.windowMs;
      over -= c.ms;
      if (over < 0) break;
    }
    const seconds = Math.max(1, Math.ceil((retryAt - Date.now()) / 1000));
    return `this session's programs held the sandbox's threads for ${Math.round(used)} ms in the last ${this.windowMs / 1000} s, more than its share (${this.budgetMs} ms) while other sessions wait; retry in ${seconds} s`;
  }
}

/** The session a scope belongs to, the unit of the CPU share. */
export function tenantOf(scope: { agentId: string; sessionKey: string }): string {
  return `${scope.agentId}\u0000${scope.sessionKey}`;
}

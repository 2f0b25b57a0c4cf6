/**
 * The CPU share's bookkeeping (src/sandbox/pool/cpu-budget.ts) in isolation: a session over its
 * share is refused only while another session has work, and the sidecar's own tasks (its
 * start-up probes and surface warm-ups, which run on an idle pool and may overlap a busy
 * session's next exec) are nobody's session: they neither count as "another session
 * waiting" nor are charged. The warm-up counted once got a long test session refused in CI.
 * And the window slides exactly while a session is charged on every exec, without keeping
 * (or moving on every query) the charges that left it.
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { CpuBudget, INTERNAL_TENANT, tenantOf } from "../../src/sandbox/pool/cpu-budget.js";

const busy = tenantOf({ agentId: "a", sessionKey: "busy" });
const other = tenantOf({ agentId: "a", sessionKey: "other" });

describe("the CPU share per session", () => {
  it("refuses a session over its share only while another session has work", () => {
    const budget = new CpuBudget(1);
    budget.started(busy);
    budget.ended(busy, budget.budgetMs + 1_000);
    expect(budget.refusal(busy)).toBeUndefined();
    budget.started(other);
    expect(budget.refusal(busy)).toMatch(/more than its share \(4000 ms\) while other sessions wait; retry in \d+ s/);
    budget.ended(other, 5);
    expect(budget.refusal(busy)).toBeUndefined();
  });

  it("does not count the sidecar's own probes as another session, nor charge them", () => {
    const budget = new CpuBudget(1);
    budget.started(busy);
    budget.ended(busy, budget.budgetMs + 1_000);
    budget.started(INTERNAL_TENANT);
    expect(budget.refusal(busy)).toBeUndefined();
    budget.ended(INTERNAL_TENANT, 60_000);
    expect(budget.usedMs(INTERNAL_TENANT)).toBe(0);
    expect(budget.refusal(INTERNAL_TENANT)).toBeUndefined();
    // Its bookkeeping stays whole: a real session's work still counts afterwards.
    budget.started(other);
    expect(budget.refusal(busy)).toMatch(/more than its share .* while other sessions wait/);
  });

  afterEach(() => {
    vi.useRealTimers();
  });

  it("slides its window exactly under a charge per exec, and keeps only about the window's charges", () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const windowMs = 1_000;
    const budget = new CpuBudget(1, windowMs);
    const made: { at: number; ms: number }[] = [];
    for (let i = 0; i < 20_000; i++) {
      // A few execs a millisecond, then a quiet spell now and then (several charges expire at once).
      vi.advanceTimersByTime(i % 997 === 0 ? 700 : i % 3 === 0 ? 1 : 0);
      const ms = 1 + (i % 7);
      budget.started(busy);
      budget.ended(busy, ms);
      made.push({ at: Date.now(), ms });
      if (i % 13 === 0) {
        const inWindow = made.filter((c) => c.at > Date.now() - windowMs);
        expect(budget.usedMs(busy)).toBe(inWindow.reduce((a, c) => a + c.ms, 0));
        // What it keeps: the window's charges, and at most as many expired ones (cut in one go).
        const kept = (budget as unknown as { charges: Map<string, { list: unknown[] }> }).charges.get(busy)!.list.length;
        expect(kept).toBeLessThanOrEqual(2 * inWindow.length + 32);
      }
    }
    // Once the window passes with no charge, nothing is left of the session.
    vi.advanceTimersByTime(windowMs);
    expect(budget.usedMs(busy)).toBe(0);
    expect((budget as unknown as { charges: Map<string, unknown> }).charges.has(busy)).toBe(false);
  });

  it("tells a refused session when enough of its window will have passed", () => {
    vi.useFakeTimers({ now: 2_000_000 });
    const budget = new CpuBudget(1, 10_000);
    // 4,000 ms is its share; 3,000 ms now, then 2,000 ms 6 s later: 1,000 ms over until the first expires.
    budget.started(busy);
    budget.ended(busy, 3_000);
    vi.advanceTimersByTime(6_000);
    budget.started(busy);
    budget.ended(busy, 2_000);
    budget.started(other);
    expect(budget.refusal(busy)).toMatch(/held the sandbox's threads for 5000 ms .* retry in 4 s$/);
  });

  it("sums the use and times the retry at one instant, even when a charge expires between clock reads", () => {
    vi.useFakeTimers({ now: 1_000 });
    const budget = new CpuBudget(1, 10_000);
    budget.started(busy);
    budget.ended(busy, 4_500); // leaves the window at 11,000
    vi.setSystemTime(10_000);
    budget.started(busy);
    budget.ended(busy, 100); // leaves it at 20,000
    budget.started(other);
    // The first clock read says 10,999; every later one 11,000, when the first charge has left.
    vi.setSystemTime(10_999);
    let reads = 0;
    const realNow = Date.now;
    Date.now = () => (reads++ === 0 ? 10_999 : 11_000);
    try {
      // 4,600 ms used, 600 over: the first charge leaving (in 1 ms) takes it under.
      expect(budget.refusal(busy)).toMatch(/for 4600 ms .* retry in 1 s$/);
    } finally {
      Date.now = realNow;
    }
  });
});

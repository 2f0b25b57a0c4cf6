/**
 * The CPU share's bookkeeping (src/sandbox/pool/cpu-budget.ts) in isolation: a session over its
 * share is refused only while another session has work, and the sidecar's own tasks (its
 * start-up probes and surface warm-ups, which run on an idle pool and may overlap a busy
 * session's next exec) are nobody's session: they neither count as "another session
 * waiting" nor are charged. The warm-up counted once got a long test session refused in CI.
 */
import { describe, expect, it } from "vitest";
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
});

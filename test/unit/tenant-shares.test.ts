/**
 * The tenants' weights in a sidecar's CPU share (src/sandbox/pool/cpu-budget.ts): a tenant's
 * sessions are one tenant (a gateway's agent id cannot pose as another tenant's), a tenant
 * over its share by weight is refused only while another tenant has work, and the scheduler
 * serves first the tenant that used the least per unit of its weight. Without weights (no
 * tenants file) nothing of this applies.
 */
import { describe, expect, it } from "vitest";
import { CpuBudget, tenantGroupOf, tenantOf } from "../../src/sandbox/pool/cpu-budget.js";

const session = (tenant: string | undefined, key: string) => tenantOf({ agentId: "agent", sessionKey: key, ...(tenant ? { tenant } : {}) });

describe("the tenants' CPU shares", () => {
  it("a session key names its tenant, and a gateway's ids cannot name another one", () => {
    expect(tenantGroupOf(session("acme", "k"))).toBe("acme");
    expect(tenantGroupOf(session(undefined, "k"))).toBe("default");
    expect(tenantGroupOf(session("default", "k"))).toBe("default");
    expect(session("default", "k")).toBe(session(undefined, "k"));
    // Ids decoded from the wire hold no lone surrogate; anything else in them is just an id.
    expect(tenantGroupOf(tenantOf({ agentId: "\u0001acme\u0001", sessionKey: "k" }))).toBe("default");
  });

  it("without weights, tenants are neither ranked nor refused", () => {
    const budget = new CpuBudget(1);
    const a = session("acme", "a");
    budget.started(a);
    budget.ended(a, 9_000);
    budget.started(session("globex", "g"));
    expect(budget.tenantRank(a)).toBe(0);
    expect(budget.tenantRefusal(a)).toBeUndefined();
    expect(budget.tenantUsedMs("acme")).toBe(0);
  });

  it("a tenant over its share by weight is refused while another tenant has work, and ranks after it", () => {
    const budget = new CpuBudget(1, 10_000);
    budget.setWeights((tenant) => (tenant === "acme" ? 3 : 1));
    // acme's two sessions share its part: 7 s of the window's 10 s between them.
    for (const key of ["a1", "a2"]) {
      budget.started(session("acme", key));
      budget.ended(session("acme", key), 3_500);
    }
    expect(budget.tenantUsedMs("acme")).toBe(7_000);
    // Alone on the pool, acme is not refused.
    expect(budget.tenantRefusal(session("acme", "a3"))).toBeUndefined();
    const g = session("globex", "g");
    budget.started(g);
    // With globex working, acme's share is 3/4 of the window: 7.5 s. Still under it.
    expect(budget.tenantRefusal(session("acme", "a3"))).toBeUndefined();
    budget.started(session("acme", "a3"));
    budget.ended(session("acme", "a3"), 1_000);
    expect(budget.tenantRefusal(session("acme", "a4"))).toMatch(
      /^tenant "acme"'s programs held the sandbox's threads for 8000 ms in the last 10 s, more than its share by its quota weight \(7500 ms: weight 3 of 4 among the tenants with work here\) while other tenants wait; retry in \d+ s$/,
    );
    expect(budget.tenantRefusal(g)).toBeUndefined();
    // The scheduler serves globex first: it used less per unit of its weight.
    expect(budget.tenantRank(g)).toBeLessThan(budget.tenantRank(session("acme", "a4")));
    budget.ended(g, 0);
    expect(budget.tenantRefusal(session("acme", "a4"))).toBeUndefined();
  });
});

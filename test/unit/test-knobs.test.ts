/**
 * The timings tests may shorten through CODEMODE_TEST_… variables (src/shared/limits.ts
 * `testKnobMs`): the CPU share's window (src/sandbox/pool/cpu-budget.ts) and the
 * orchestrator link's keepalive (src/sandbox/link/orchestrator-link.ts). Unset, each is the
 * product's value; set, it is clamped like config; not an integer, it is refused by name.
 */
import { describe, expect, it } from "vitest";
import { testKnobMs } from "../../src/shared/limits.js";
import { CpuBudget, cpuShareWindowMs, WINDOW_MS } from "../../src/sandbox/pool/cpu-budget.js";
import { linkKeepalive } from "../../src/sandbox/link/orchestrator-link.js";

const LIMIT = { default: 10_000, min: 1_000, max: 600_000 };

describe("a test knob", () => {
  it("is the product's value when unset or empty, the variable's when set, clamped to its range", () => {
    expect(testKnobMs("CODEMODE_TEST_X_MS", LIMIT, {})).toBe(10_000);
    expect(testKnobMs("CODEMODE_TEST_X_MS", LIMIT, { CODEMODE_TEST_X_MS: " " })).toBe(10_000);
    expect(testKnobMs("CODEMODE_TEST_X_MS", LIMIT, { CODEMODE_TEST_X_MS: "3000" })).toBe(3_000);
    expect(testKnobMs("CODEMODE_TEST_X_MS", LIMIT, { CODEMODE_TEST_X_MS: "5" })).toBe(1_000);
    expect(testKnobMs("CODEMODE_TEST_X_MS", LIMIT, { CODEMODE_TEST_X_MS: "9999999" })).toBe(600_000);
  });

  it("refuses a value that is not an integer, naming the variable and the value", () => {
    expect(() => testKnobMs("CODEMODE_TEST_X_MS", LIMIT, { CODEMODE_TEST_X_MS: "3s" })).toThrow(
      'CODEMODE_TEST_X_MS must be an integer number of milliseconds, got "3s"',
    );
    expect(() => testKnobMs("CODEMODE_TEST_X_MS", LIMIT, { CODEMODE_TEST_X_MS: "1.5" })).toThrow(/CODEMODE_TEST_X_MS/);
  });

  it("sets the CPU share's window, 10 s by default, and the share follows it", () => {
    expect(cpuShareWindowMs({})).toBe(WINDOW_MS);
    expect(WINDOW_MS).toBe(10_000);
    expect(cpuShareWindowMs({ CODEMODE_TEST_CPU_SHARE_WINDOW_MS: "3000" })).toBe(3_000);
    const budget = new CpuBudget(2, 3_000);
    expect(budget.budgetMs).toBe(2_400);
    expect(new CpuBudget(2).budgetMs).toBe(8_000);
  });

  it("sets the link's keepalive, 10 s with 5 s for the answer by default", () => {
    expect(linkKeepalive({})).toEqual({ timeMs: 10_000, timeoutMs: 5_000 });
    expect(linkKeepalive({ CODEMODE_TEST_LINK_KEEPALIVE_MS: "1000" })).toEqual({ timeMs: 1_000, timeoutMs: 500 });
    expect(linkKeepalive({ CODEMODE_TEST_LINK_KEEPALIVE_MS: "60000" })).toEqual({ timeMs: 60_000, timeoutMs: 5_000 });
  });
});

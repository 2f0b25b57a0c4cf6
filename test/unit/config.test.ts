/** The one config schema: the seed's defaults, clamps, and errors that name the key. */
import { describe, expect, it } from "vitest";
import { DEFAULT_CONFIG, LIMITS, parseCodeModeConfig, runConfig } from "../../src/shared/config.js";

describe("code-mode config", () => {
  it("has the seed's defaults", () => {
    expect(DEFAULT_CONFIG).toMatchObject({
      timeoutMs: 10000,
      memoryLimitBytes: 67108864,
      maxOutputBytes: 65536,
      maxSnapshotBytes: 10485760,
      maxPendingToolCalls: 16,
      snapshotTtlSeconds: 900,
      searchDefaultLimit: 8,
      maxSearchLimit: 50,
      languages: ["javascript", "typescript"],
      runtime: "quickjs-wasi",
      mode: "only",
    });
    expect(Object.isFrozen(DEFAULT_CONFIG)).toBe(true);
  });
  it("clamps every number to its range", () => {
    for (const [key, l] of Object.entries(LIMITS)) {
      if (key === "searchDefaultLimit") continue;
      expect(parseCodeModeConfig({ [key]: l.min - 1 })[key as keyof typeof LIMITS]).toBe(l.min);
      expect(parseCodeModeConfig({ [key]: l.max + 1 })[key as keyof typeof LIMITS]).toBe(l.max);
    }
  });
  it("clamps searchDefaultLimit to maxSearchLimit", () => {
    expect(parseCodeModeConfig({ searchDefaultLimit: 30, maxSearchLimit: 10 }).searchDefaultLimit).toBe(10);
  });
  it("later layers win", () => {
    expect(parseCodeModeConfig({ timeoutMs: 2000 }, { timeoutMs: 3000 }, undefined).timeoutMs).toBe(3000);
  });
  it("refuses wrong types with the key and value named", () => {
    expect(() => parseCodeModeConfig({ timeoutMs: "fast" })).toThrow(/timeoutMs.*"fast"/);
    expect(() => parseCodeModeConfig({ languages: ["python"] })).toThrow(/languages.*"python"/);
    expect(() => parseCodeModeConfig({ languages: [] })).toThrow(/languages/);
    expect(() => parseCodeModeConfig({ runtime: "v8" })).toThrow(/runtime/);
    expect(() => parseCodeModeConfig({ nope: 1 })).toThrow(/nope/);
  });
});

describe("runConfig (a resolved run's config, parsed once)", () => {
  it("is the same frozen config for the same run layer when the request adds nothing, and equals a fresh parse", () => {
    const layer = { timeoutMs: 1234, maxPendingToolCalls: 7 };
    const a = runConfig(layer);
    expect(runConfig(layer, {})).toBe(a);
    expect(a).toEqual(parseCodeModeConfig(layer));
    expect(Object.isFrozen(a)).toBe(true);
    // Another layer object (another resolve) is parsed on its own.
    expect(runConfig({ ...layer })).not.toBe(a);
  });

  it("applies a request's own layer over the run's, and refuses what either gets wrong", () => {
    const layer = { timeoutMs: 1234 };
    expect(runConfig(layer, { timeoutMs: 999 }).timeoutMs).toBe(999);
    expect(runConfig(layer).timeoutMs).toBe(1234);
    expect(() => runConfig({ coreSourceName: "not a name" })).toThrow(/coreSourceName/);
    expect(() => runConfig(layer, { coreSourceName: "not a name" })).toThrow(/coreSourceName/);
    expect(runConfig(undefined)).toEqual(DEFAULT_CONFIG);
  });
});

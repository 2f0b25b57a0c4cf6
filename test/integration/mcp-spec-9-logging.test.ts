/**
 * Code Mode for MCP spec section 9 (with 3.3.1's truncation rule): console.log, debug,
 * warn and error with their levels, the guidance to aggregate before logging, and log
 * truncation signalled by a final warn entry naming the limit. Through `codemode mcp`
 * over stdio.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startStdioFront, type Front } from "../helpers/mcp-front.js";

let front: Front;
beforeAll(async () => {
  front = await startStdioFront();
});
afterAll(async () => {
  await front?.close();
});

describe("spec 9: logging conventions", () => {
  it("R9-1 console.log, console.debug, console.warn and console.error are supported, each with its level", async () => {
    const r = await front.run(`console.log("l"); console.debug("d"); console.warn("w"); console.error("e"); console.info("i");`);
    expect(r.logs.map((l) => [l.level, l.message])).toEqual([
      ["log", "l"],
      ["debug", "d"],
      ["warn", "w"],
      ["error", "e"],
      ["log", "i"],
    ]);
  });

  it("R9-2 log times are integer milliseconds since the sandbox started, in order", async () => {
    const sent = performance.now();
    const r = await front.run(`for (let i = 0; i < 5; i++) { console.log(i); await new Promise((ok) => setTimeout(ok, 10)); }`);
    const callMs = Math.ceil(performance.now() - sent);
    const times = r.logs.map((l) => l.timeMs);
    expect(times.every(Number.isInteger)).toBe(true);
    expect([...times].sort((a, b) => a - b)).toEqual(times);
    // Counted from the sandbox's start, not the epoch: the sandbox started after the call was
    // sent and logged before its answer came, so every time fits inside the call.
    expect(times.at(-1)).toBeLessThanOrEqual(callMs);
  });

  it("R9-3 the host encourages agents to aggregate, filter and summarize before logging", async () => {
    const d = (await front.tool()).description ?? "";
    expect(d).toMatch(/Aggregate and filter before logging/);
    expect(d).toMatch(/counts, top-N and summaries/);
  });

  it("R9-4 truncation is signalled by a final warn entry that names the applied limit", async () => {
    const r = await front.run(`for (let i = 0; i < 200; i++) console.log("entry " + i + " " + "x".repeat(20)); globalThis.__codemode_result__ = "done";`, {
      limits: { maxLogBytes: 2048 },
    });
    const last = r.logs.at(-1)!;
    expect(last.level).toBe("warn");
    expect(last.message).toMatch(/truncated/);
    expect(last.message).toContain("maxLogBytes (2048 bytes)");
    const kept = r.logs.slice(0, -1).map((l) => l.message);
    expect(kept.length).toBeGreaterThan(5);
    expect(kept.length).toBeLessThan(200);
    expect(kept).toEqual(kept.map((_, i) => `entry ${i} ${"x".repeat(20)}`));
    expect(r.result).toBe("done");
  });

  it("R9-5 without a requested limit the host's maximum applies, and truncation does not fail the script", async () => {
    const r = await front.run(`for (let i = 0; i < 2000; i++) console.log("y".repeat(100)); globalThis.__codemode_result__ = { finished: true };`);
    expect(r.logs.at(-1)!.message).toContain("maxLogBytes (65536 bytes)");
    expect(r.result).toEqual({ finished: true });
    expect(r.diagnostics).toEqual([]);
  });
});

/**
 * The sandbox core through real processes and real gRPC: each status and error code,
 * each limit, the exec input rules, module access (and its false positives), a
 * TypeScript cell, native runaway loops, deep recursion and nesting, and the service
 * still serving after each.
 */
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ResultStatus, ErrorCode } from "../../src/gen/codemode/common/v1/common_pb.js";
import { execute, scope, startStack, type Stack } from "../helpers/harness.js";

const fixture = (name: string) => readFileSync(new URL(`../fixtures/${name}`, import.meta.url), "utf8");

let stack: Stack;
beforeAll(async () => {
  stack = await startStack(["--threads", "2"]);
});
afterAll(async () => {
  expect(await stack.stop()).toBe(0);
});

async function stillServing() {
  const { model } = await execute(stack, { code: "return 'alive'" });
  expect(model).toMatchObject({ status: "completed", value: "alive" });
}

describe("results", () => {
  it("completed: the returned value becomes value, with telemetry", async () => {
    const { result, model } = await execute(stack, { code: "return 1 + 1" });
    expect(result.status).toBe(ResultStatus.COMPLETED);
    expect(result.valueJson).toBe("2");
    expect(model.status).toBe("completed");
    expect(model.value).toBe(2);
    expect(model.telemetry).toMatchObject({ catalogSize: 0, modelVisibleTools: ["exec", "wait"], searchCount: 0, describeCount: 0, callCount: 0 });
  });

  it("failed without a code: an uncaught guest error, with the model's line and column", async () => {
    const { model } = await execute(stack, { code: "const a = 1;\nthrow new TypeError('boom');" });
    expect(model.status).toBe("failed");
    expect(model.code).toBeUndefined();
    expect(model.error).toMatch(/^TypeError: boom \(line 2, column \d+\)$/);
  });

  it("outputs keep call order; text, json and console all land in output", async () => {
    const { model, events } = await execute(stack, { code: "text('a'); json({b: 1}); console.log('c', 2); text({d: true}); return null" });
    expect(model.output).toEqual([
      { type: "text", text: "a" },
      { type: "json", value: { b: 1 } },
      { type: "text", text: "c 2" },
      { type: "text", text: '{"d":true}' },
    ]);
    expect(events.filter((e) => e.event.case === "output")).toHaveLength(4);
    expect(events.at(-1)?.event.case).toBe("result");
  });

  it("values that are not JSON-compatible are converted to plain data", async () => {
    const { model } = await execute(stack, {
      code: "const o = {n: 10n, f: function named() {}, u: undefined, d: new Date(0), e: new RangeError('r'), m: new Map([['k', 1]]), s: new Set([1]), inf: Infinity, sym: Symbol('x')}; o.self = o; return [o, undefined]",
    });
    expect(model.value).toEqual([
      {
        n: "10",
        f: "[Function named]",
        d: "1970-01-01T00:00:00.000Z",
        e: { name: "RangeError", message: "r" },
        m: [["k", 1]],
        s: [1],
        inf: "Infinity",
        sym: "Symbol(x)",
        self: "[Circular]",
      },
      null,
    ]);
  });
});

describe("exec input", () => {
  it("requires code or command", async () => {
    const { model } = await execute(stack, { code: "  " });
    expect(model).toMatchObject({ status: "failed", code: "invalid_input" });
  });
  it("accepts command as an alias", async () => {
    const { model } = await execute(stack, { command: "return 'via command'" });
    expect(model).toMatchObject({ status: "completed", value: "via command" });
  });
  it("accepts code and command when they match", async () => {
    const { model } = await execute(stack, { code: "return 3", command: "return 3" });
    expect(model).toMatchObject({ status: "completed", value: 3 });
  });
  it("refuses code and command that differ", async () => {
    const { model } = await execute(stack, { code: "return 3", command: "return 4" });
    expect(model).toMatchObject({ status: "failed", code: "invalid_input" });
    expect(model.error).toMatch(/must match/);
  });
  it("refuses an unknown language", async () => {
    const { model } = await execute(stack, { code: "return 1", language: "python" });
    expect(model).toMatchObject({ status: "failed", code: "invalid_input" });
  });
  it("respects the languages config", async () => {
    const { model } = await execute(stack, { code: "return 1", language: "typescript", config: { languages: ["javascript"] } });
    expect(model).toMatchObject({ status: "failed", code: "invalid_input" });
    expect(model.error).toMatch(/disabled/);
  });
  it("reports a syntax error as invalid_input with line and column", async () => {
    const { model } = await execute(stack, { code: "let ok = 1;\nlet x = ;" });
    expect(model).toMatchObject({ status: "failed", code: "invalid_input" });
    expect(model.error).toMatch(/line 2, column 9/);
  });
  it("a scope without run_id is a contract violation (gRPC INVALID_ARGUMENT)", async () => {
    await expect(execute(stack, { scope: { agentId: "a", sessionId: "s", sessionKey: "k", agentRunId: "" }, code: "return 1" })).rejects.toMatchObject({
      code: "invalid_argument",
    });
  });
});

describe("typescript", () => {
  it("transforms and runs a TypeScript cell", async () => {
    const { model } = await execute(stack, { code: fixture("typescript-cell.ts"), language: "typescript" });
    expect(model).toMatchObject({ status: "completed", value: { x: 4, y: 6 } });
  });
  it("reports transform errors with line and column", async () => {
    const { model } = await execute(stack, { code: "const a: number = 1;\nconst x: number = ;", language: "typescript" });
    expect(model).toMatchObject({ status: "failed", code: "invalid_input" });
    expect(model.error).toMatch(/line 2, column 19/);
  });
});

describe("module access", () => {
  const refused: Array<[string, string]> = [
    ["static import", "import fs from 'fs';\nreturn 1"],
    ["dynamic import()", "const m = await import('fs'); return 1"],
    ["import.meta", "return import.meta.url"],
    ["require()", "const fs = require('fs'); return 1"],
    ["module.require()", "return module.require('fs')"],
    ["export", "export const a = 1"],
    ["TypeScript import", "import type { A } from 'a';\nimport b from 'b';\nreturn b"],
    // Only a backslash tells these from programs that never name a loader (those skip the tokenizer).
    ["require() spelled with an escape", "const fs = req\\u0075ire('fs'); return 1"],
    ["importScripts spelled with escapes", "\\u0069mportScripts('x'); return 1"],
    ["createRequire, capitalized", "const r = createRequire('/'); return 1"],
  ];
  for (const [name, code] of refused) {
    it(`refuses ${name}`, async () => {
      const { model } = await execute(stack, { code, language: name.startsWith("TypeScript") ? "typescript" : "javascript" });
      expect(model).toMatchObject({ status: "failed", code: "invalid_input" });
      expect(model.error).toMatch(/module access/);
    });
  }
  it("does not refuse identifiers, strings, comments and properties that merely contain import/require", async () => {
    const code = [
      "// import x from 'y'; require('z')",
      "const important = 'import fs from \"fs\"';",
      "const requirement = `require('x')`;",
      "const o = { import: 1, require: 2 };",
      "const re = /import\\(x\\)/;",
      "return [important.length > 0, requirement.length > 0, o.import + o.require, re.test('import(x)')];",
    ].join("\n");
    const { model } = await execute(stack, { code });
    expect(model).toMatchObject({ status: "completed", value: [true, true, 3, true] });
  });
});

describe("no eval, no host", () => {
  it("eval and Function-from-string fail inside the VM", async () => {
    const code = `
      const tries = [() => eval("1"), () => Function("return 1")(), () => (function(){}).constructor("return 1")(),
        () => (async function(){}).constructor("return 1"), () => (function*(){}).constructor("return 1")];
      return tries.map((t) => { try { t(); return "ran"; } catch (e) { return e.name; } });`;
    const { model } = await execute(stack, { code });
    expect(model.value).toEqual(["TypeError", "TypeError", "TypeError", "TypeError", "TypeError"]);
  });
  it("has no process, require, filesystem, network or environment; time is UTC", async () => {
    const code =
      "return [typeof process, typeof require, typeof fetch, typeof XMLHttpRequest, typeof std, typeof os, typeof Deno, new Date(0).getTimezoneOffset(), new Date(0).toString()]";
    const { model } = await execute(stack, { code });
    expect(model.value).toEqual([
      "undefined",
      "undefined",
      "undefined",
      "undefined",
      "undefined",
      "undefined",
      "undefined",
      0,
      "Thu Jan 01 1970 00:00:00 GMT+0000",
    ]);
  });
});

describe("limits", () => {
  it("timeout: an infinite loop fails with timeout and the next exec completes", async () => {
    const { model } = await execute(stack, { code: "while (true) {}", config: { timeoutMs: 500 } });
    // Stopped by its deadline (the code says so), not left to run: no clock needed.
    expect(model).toMatchObject({ status: "failed", code: "timeout" });
    await stillServing();
  });

  it("timeout values are clamped to the seed's range (50 ms becomes 100 ms)", async () => {
    const { model } = await execute(stack, { code: "const t = Date.now(); while (Date.now() - t < 60) {} return 'ok'", config: { timeoutMs: 50 } });
    expect(model).toMatchObject({ status: "completed", value: "ok" });
  });

  it("a native loop that ignores interrupts: the host kills its worker, a concurrent run completes", async () => {
    const runaway = execute(stack, { code: fixture("native-runaway.js"), config: { timeoutMs: 500 } });
    const others = Promise.all([1, 2, 3].map((i) => execute(stack, { code: `let s = 0; for (let i = 0; i < 1000; i++) s += i; return ${i} + s` })));
    const [bad, good] = await Promise.all([runaway, others]);
    expect(bad.model).toMatchObject({ status: "failed", code: "timeout" });
    expect(
      good.map((g) => g.model.value),
      JSON.stringify(good.map((g) => g.model)),
    ).toEqual([499501, 499502, 499503]);
    await stillServing();
  });

  it("deep recursion is a guest RangeError, never a trap", async () => {
    const { model } = await execute(stack, { code: fixture("deep-recursion.js") });
    expect(model.status).toBe("failed");
    expect(model.error).toMatch(/^RangeError: Maximum call stack size exceeded/);
    expect(model.output).toEqual([{ type: "text", text: "RangeError" }]);
    await stillServing();
  });

  it("a 100k-deep JSON literal in the source fails cleanly", async () => {
    const code = `return ${"[".repeat(100_000)}${"]".repeat(100_000)}`;
    const { model } = await execute(stack, { code });
    expect(model.status).toBe("failed");
    expect(model.error).toMatch(/RangeError|stack/);
    await stillServing();
  });

  it("a 100k-deep JSON text parsed at run time fails cleanly", async () => {
    const { model } = await execute(stack, { code: 'return JSON.parse("[".repeat(100000) + "]".repeat(100000))' });
    expect(model.status).toBe("failed");
    expect(model.error).toMatch(/RangeError/);
    await stillServing();
  });

  it("output stops at maxOutputBytes with output_limit_exceeded", async () => {
    const { model } = await execute(stack, { code: "for (let i = 0; i < 1000; i++) text('x'.repeat(100)); return 1", config: { maxOutputBytes: 2048n } });
    expect(model).toMatchObject({ status: "failed", code: "output_limit_exceeded" });
    // Each item is charged its text plus a fixed 32-byte overhead.
    const items = model.output as Array<{ text: string }>;
    const charged = items.reduce((n, o) => n + o.text.length + 32, 0);
    expect(charged).toBeLessThanOrEqual(2048);
    expect(charged).toBeGreaterThan(2048 - 132);
  });

  it("a returned value larger than maxOutputBytes is output_limit_exceeded", async () => {
    const { model } = await execute(stack, { code: "return 'y'.repeat(5000)", config: { maxOutputBytes: 1024n } });
    expect(model).toMatchObject({ status: "failed", code: "output_limit_exceeded" });
  });

  it("the memory limit holds", async () => {
    const { model } = await execute(stack, {
      code: "const a = []; for (;;) a.push('z'.repeat(65536) + a.length); ",
      config: { memoryLimitBytes: 4n * 1024n * 1024n },
    });
    expect(model.status).toBe("failed");
    expect(model.error).toMatch(/out of memory/);
    await stillServing();
  });

  it("the configured memory limit is the one that holds: about 20 MiB fails under 4 MiB and completes under the default", async () => {
    // 320 strings of 64 KiB, all kept: far below the 64 MiB default, five times the 4 MiB asked for.
    const code = "const a = []; for (let i = 0; i < 320; i++) a.push('z'.repeat(65536) + i); return a.length";
    const limited = await execute(stack, { code, config: { memoryLimitBytes: 4n * 1024n * 1024n } });
    expect(limited.model).toMatchObject({ status: "failed", error: expect.stringMatching(/out of memory/) });
    // The same limit set on the run (OpenRun's config) rather than on the exec.
    const run = scope("mem");
    await stack.control.openRun({ scope: run, catalog: { case: "tools", value: { tools: [] } }, config: { memoryLimitBytes: 4n * 1024n * 1024n } });
    const limitedRun = await execute(stack, { scope: run, code });
    expect(limitedRun.model).toMatchObject({ status: "failed", error: expect.stringMatching(/out of memory/) });
    const dflt = await execute(stack, { code });
    expect(dflt.model).toMatchObject({ status: "completed", value: 320 });
    await stillServing();
  });

  it("an awaited promise that can never settle fails instead of hanging", async () => {
    const { model } = await execute(stack, { code: "await new Promise(() => {}); return 1" });
    expect(model.status).toBe("failed");
    expect(model.error).toMatch(/never settle/);
  });

  it("reports the wire error code enum alongside the model shape", async () => {
    const { result } = await execute(stack, { code: "while(true){}", config: { timeoutMs: 200 } });
    expect(result.code).toBe(ErrorCode.TIMEOUT);
  });
});

/** Reproductions from the red-team review, one per defended weakness. */
describe("security regressions", () => {
  it("an inherited toJSON that nulls request payloads fails nothing but the guest's own calls", async () => {
    const { model } = await execute(stack, {
      code: "Object.prototype.toJSON = function () { return null }; const r = await tools.search('x'); let d = ''; try { await tools.describe('x') } catch (e) { d = e.name } return [r, d]",
    });
    expect(model.status).toBe("completed");
    await stillServing();
  });

  it("dynamic import() after a context the tokenizer misreads is still refused", async () => {
    const { model } = await execute(stack, {
      code: 'const o = {}; const p = o?.return / 2;\nreturn await import("x").then(() => "loaded", (e) => "err " + e)',
    });
    expect(model).toMatchObject({ status: "failed", code: "invalid_input" });
    expect(model.error).toMatch(/could not verify/);
  });

  it("empty output items still count toward maxOutputBytes", async () => {
    const { model } = await execute(stack, { code: "for (;;) text('')", config: { timeoutMs: 2000 } });
    expect(model).toMatchObject({ status: "failed", code: "output_limit_exceeded" });
    expect((model.output as unknown[]).length).toBeLessThanOrEqual(65536 / 32);
  });

  it("a returned value's own getter runs once, inside the VM, as JSON.stringify would; one that throws fails the run with its error", async () => {
    const ok = await execute(stack, { code: "let n = 0; setTimeout(() => text('reads ' + n), 10); return { get x() { return ++n }, y: 1 }" });
    expect(ok.model).toMatchObject({ status: "completed", value: { x: 1, y: 1 }, output: [{ type: "text", text: "reads 1" }] });
    const bad = await execute(stack, { code: "return { get x() { throw new Error('getter') }, y: 1 }" });
    expect(bad.model).toMatchObject({ status: "failed" });
    expect(bad.model.error).toMatch(/^Error: getter/);
  });
});

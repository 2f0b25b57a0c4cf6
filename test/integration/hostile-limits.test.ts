/**
 * Hostile programs cannot outrun their limits (issue 30), against a real `codemode start`:
 * a deadline ends the run whatever guest code the engine calls back into (a stack-trace
 * hook, a conversion inside a URLSearchParams method) without killing the worker thread;
 * an error's text is bounded by the output budget and reaches a client with gRPC's default
 * receive limit; a failed suspension of a large heap costs less than one memory limit;
 * code that reads as a regex to the module check and as divisions to QuickJS is refused.
 * Each test is named after the attack it defends against (docs/security.md).
 */
import { readFileSync, writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { findModuleAccess } from "../../src/sandbox/program/module-check.js";
import { execute, scope as newScope, openEmptyRun, startStack, type Stack } from "../helpers/harness.js";
import { until } from "../helpers/until.js";
import { type Front, startStdioFront } from "../helpers/mcp-front.js";

let stack: Stack;
beforeAll(async () => {
  stack = await startStack(["--threads", "1"]);
});
afterAll(async () => {
  expect(await stack.stop()).toBe(0);
});

const KILLED = /terminating its worker thread/;
const killLines = () => stack.proc.stderr.filter((l) => KILLED.test(l)).length;

/** Runs `code` on a new run with `config`; checks that no worker thread was killed for it. */
async function runUnkilled(code: string, config: Record<string, unknown>, openRun?: () => Promise<ReturnType<typeof newScope>>) {
  const before = killLines();
  const scope = openRun ? await openRun() : await openEmptyRun(stack.control);
  const out = await execute(stack, { scope, code, config });
  // The exec's own log line is written before its Result: a kill for it would be logged by then.
  expect(killLines(), stack.proc.stderr.filter((l) => KILLED.test(l)).join("\n")).toBe(before);
  return out;
}

describe("a deadline ends the run whatever guest code runs", () => {
  it("a looping Error.prepareStackTrace hook is stopped by its deadline, without a thread kill (code mode)", async () => {
    const { model } = await runUnkilled(`Error.prepareStackTrace = () => { for (;;) {} }; new Error("x"); return "past the deadline";`, { timeoutMs: 500 });
    expect(model).toMatchObject({ status: "failed", code: "timeout" });
  });

  it("a loop of errors whose hook is busy is stopped by its deadline, without a thread kill", async () => {
    const { model } = await runUnkilled(
      `Error.prepareStackTrace = () => { const t = Date.now(); while (Date.now() - t < 20); return "s"; };
       for (;;) new Error("x");`,
      { timeoutMs: 500 },
    );
    expect(model).toMatchObject({ status: "failed", code: "timeout" });
  });

  it("a looping Error.prepareStackTrace hook is stopped by its deadline, without a thread kill (tool_search_code)", async () => {
    const { model } = await runUnkilled(`Error.prepareStackTrace = () => { for (;;) {} }; new Error("x"); return "past the deadline";`, {}, async () => {
      const scope = newScope("ts");
      await stack.control.openRun({ scope, catalog: { case: "tools", value: { tools: [] } }, toolSearch: { enabled: true, codeTimeoutMs: 500 } });
      return scope;
    });
    expect(model).toMatchObject({ status: "failed", code: "timeout" });
  });

  it("URLSearchParams conversions cannot swallow the interrupt", async () => {
    const { model } = await runUnkilled(
      `const sp = new URLSearchParams();
       const k = { toString() { for (;;) {} } }, v = { toString() { throw new Error("caught instead") } };
       for (;;) { try { sp.append(k, v); } catch (e) {} }`,
      { timeoutMs: 500 },
    );
    expect(model).toMatchObject({ status: "failed", code: "timeout" });
  });

  it("a searchParams loop over a long query is stopped by the interrupt, without a thread kill", async () => {
    const { model } = await runUnkilled(
      `const u = new URL("https://example.com/?" + "a=1&".repeat(200000));
       for (let n = 0; ; n++) { u.searchParams.append("a" + n, "b"); u.searchParams.keys(); }`,
      { timeoutMs: 500 },
    );
    expect(model).toMatchObject({ status: "failed", code: "timeout" });
  });

  it("URLSearchParams keeps the web's behaviour under its guards", async () => {
    const { model } = await execute(stack, {
      code: `const sp = new URLSearchParams("b=2&a=1");
        sp.append("c", 3); sp.set("a", { toString() { return "x"; } });
        let symbol; try { sp.append(Symbol("s"), "v"); } catch (e) { symbol = e.name; }
        sp.sort();
        const u = new URL("https://example.com/p?z=9"); u.searchParams.append("y", "8");
        return { s: sp.toString(), has: sp.has("c"), all: sp.getAll("a"), keys: [...sp.keys()], iter: [...sp].length,
          same: URLSearchParams.prototype[Symbol.iterator] === URLSearchParams.prototype.entries,
          lengths: [sp.append.length, sp.get.length], symbol, href: u.href };`,
    });
    expect(model).toMatchObject({
      status: "completed",
      value: {
        s: "a=x&b=2&c=3",
        has: true,
        all: ["x"],
        keys: ["a", "b", "c"],
        iter: 3,
        same: true,
        lengths: [2, 1],
        symbol: "TypeError",
        href: "https://example.com/p?z=9&y=8",
      },
    });
  });
});

describe("an error's text is bounded by the output budget", () => {
  const EIGHT_MIB = 8 * 1024 * 1024;
  for (const [what, code] of [
    ["message", `throw new Error("x".repeat(${EIGHT_MIB}));`],
    ["name", `const e = new Error("m"); e.name = "N".repeat(${EIGHT_MIB}); throw e;`],
    ["timer", `setTimeout(() => { throw new Error("t".repeat(${EIGHT_MIB})); }, 1); await new Promise((r) => setTimeout(r, 50));`],
  ] as const) {
    it(`an 8 MiB uncaught error (its ${what}) comes back within the output budget, marked as truncated, through a client with gRPC's default receive limit`, async () => {
      const { result, model } = await execute(stack, { code, config: { memoryLimitBytes: 134_217_728n } });
      expect(model.status).toBe("failed");
      expect(model.error).toMatch(/ … \[error truncated: \d+ bytes, the output budget leaves 65536\]$/);
      expect(Buffer.byteLength(model.error!)).toBeLessThanOrEqual(65_536);
      expect(Buffer.byteLength(result.modelJson)).toBeLessThan(2 * 65_536 + 4_096);
    });
  }

  it("output already written leaves less room for the error", async () => {
    const { model } = await execute(stack, { code: `text("o".repeat(60000)); throw new Error("x".repeat(100000));` });
    expect(model.status).toBe("failed");
    const leaves = Number(/the output budget leaves (\d+)\]$/.exec(model.error!)?.[1]);
    expect(leaves).toBeGreaterThanOrEqual(1_024);
    expect(leaves).toBeLessThan(65_536 - 60_000);
  });

  describe("through the MCP front", () => {
    let front: Front;
    beforeAll(async () => {
      front = await startStdioFront({});
    });
    afterAll(async () => {
      await front.close();
    });

    it("a loop of errors, each formatted by codemode.run's own stack hook, is stopped by its deadline, without a thread kill", async () => {
      const kills = front.stderr.filter((l) => KILLED.test(l)).length;
      // The engine drops an interrupt raised while a stack hook runs; here the hook is the host's.
      const res = await front.run(`for (;;) { try { null.x; } catch (e) {} new Error("x"); }`, { limits: { timeoutMs: 500 } });
      expect(res.diagnostics.at(-1)).toMatchObject({ code: "SANDBOX_LIMIT", errorClass: "SandboxLimitError" });
      expect(front.stderr.filter((l) => KILLED.test(l)).length).toBe(kills);
    });

    it("an 8 MiB uncaught error reaches the MCP client as the script's own error, truncated", async () => {
      const res = await front.run(`throw new Error("x".repeat(${EIGHT_MIB}));`, { limits: { maxMemoryBytes: 134_217_728 } });
      const uncaught = res.diagnostics.find((d) => d.code === "UNCAUGHT_EXCEPTION");
      expect(uncaught?.message).toMatch(/^Uncaught Error: x+ … \[error truncated: \d+ bytes, the output budget leaves \d+\]/);
      expect(Buffer.byteLength(JSON.stringify(res))).toBeLessThan(4 * 1024 * 1024);
    });
  });
});

describe("a failed suspension stays within the memory limit", () => {
  it("a failed suspension of a 200 MiB heap under a 256 MiB limit grows RSS by less than one memory limit beyond the same run without it, and gives it back", async () => {
    const status = () => readFileSync(`/proc/${stack.proc.child.pid!}/status`, "utf8");
    const mib = (key: string) => Number(new RegExp(`${key}:\\s+(\\d+) kB`).exec(status())![1]) / 1024;
    // The peak is the process's high-water mark, reset through clear_refs before each run.
    const peakOf = async (code: string) => {
      writeFileSync(`/proc/${stack.proc.child.pid!}/clear_refs`, "5");
      const before = mib("VmRSS");
      const { model } = await execute(stack, { code, config: { memoryLimitBytes: 268_435_456n, timeoutMs: 60_000 } });
      return { model, growth: mib("VmHWM") - before, before };
    };
    // Incompressible data: a seeded xorshift fills typed arrays, so the snapshot cannot shrink.
    const fill = `let x = 2463534242; const held = [];
      for (let i = 0; i < 200; i++) { const a = new Uint32Array(262144);
        for (let j = 0; j < a.length; j++) { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; a[j] = x >>> 0; } held.push(a); }`;
    const plain = await peakOf(`${fill} return held.length;`);
    expect(plain.model).toMatchObject({ status: "completed", value: 200 });
    const held = await peakOf(`${fill} await yield_control("hold"); return held.length;`);
    expect(held.model).toMatchObject({ status: "failed", code: "snapshot_limit_exceeded" });
    expect(held.growth - plain.growth, `peak growth ${held.growth.toFixed(0)} MiB suspending, ${plain.growth.toFixed(0)} MiB without`).toBeLessThan(256);
    // And the encoding's memory is given back: RSS returns to where the run without a suspension left it.
    await until(() => mib("VmRSS") <= plain.before + plain.growth + 64, "RSS back to where the run without a suspension left it", {
      detail: () => `RSS ${mib("VmRSS").toFixed(0)} MiB; before ${plain.before.toFixed(0)} MiB, growth without suspending ${plain.growth.toFixed(0)} MiB`,
    });
    // Two fills of 200 MiB in QuickJS take about half a minute on a quiet machine: a busy one gets room.
  }, 180_000);
});

describe("the module check reads code as QuickJS does", () => {
  const hidden = [
    `const o = {}; const g = 1; return o?.return / import("node:fs") /g;`,
    `const o = {}; const g = 1; return o?.delete / import("node:fs") /g;`,
    `const o = {}; const g = 1; return o?.typeof / import("node:fs") /g;`,
    `const o = {}; const g = 1; return o?.of / import("node:fs") /g;`,
    `const o = {}; const g = 1; const v = o?.return\n/ import("node:fs") /g; return v;`,
  ];

  it("reads `?.keyword / … /` as QuickJS would not: the token scan refuses it", () => {
    for (const code of hidden) expect(findModuleAccess(code), code).toBeDefined();
    // A real regex, and real divisions, still pass.
    expect(findModuleAccess(`return /import/.test("import x");`)).toBeUndefined();
    expect(findModuleAccess(`const a = 4, b = 2, g = 1; return a / b / g; // import is mentioned`)).toBeUndefined();
  });

  for (const language of ["javascript", "typescript"] as const) {
    it(`?.return / … / and ?.delete / … / programs hiding an import are refused before they run (${language})`, async () => {
      for (const code of hidden.slice(0, 2)) {
        const { model } = await execute(stack, { code, language });
        expect(model.status, code).toBe("failed");
        expect(model.error, code).toMatch(/rejects module access|could not verify that the program has no module access/);
      }
    });
  }
});

describe("a memory exhaustion is reported as one", () => {
  const OOM = `const a = []; for (;;) a.push(new Array(1e5).fill(a.length));`;
  /** Runs `code` in a session of its own (`tag`), so the fair share never refuses the mix. */
  const runIn = async (on: Stack, tag: string, code: string, config: Record<string, unknown> = {}) =>
    (await execute(on, { scope: await openEmptyRun(on.control, tag), code, config })).model;

  /** Twelve runs of the program, each beside a loop, a plain exec and one that allocates within its limit. */
  async function underMixedLoad(on: Stack) {
    for (let i = 0; i < 12; i++) {
      const [oom, loop, plain, alloc] = await Promise.all([
        runIn(on, `oom${i}`, OOM, { memoryLimitBytes: 16_777_216n }),
        runIn(on, `loop${i}`, `for (;;) {}`, { timeoutMs: 300 }),
        runIn(on, `plain${i}`, `text("hi"); return 1 + 1;`),
        runIn(on, `alloc${i}`, `const b = []; for (let j = 0; j < 50; j++) b.push(new Array(1e4).fill(j)); return b.length;`),
      ]);
      expect(oom.code, `run ${i}: ${oom.error}`).not.toBe("runtime_unavailable");
      expect(oom, `run ${i}`).toMatchObject({ status: "failed", error: expect.stringMatching(/^InternalError: out of memory/) });
      expect(oom.code ?? "").toBe("");
      expect(loop).toMatchObject({ status: "failed", code: "timeout" });
      expect(plain).toMatchObject({ status: "completed", value: 2 });
      expect(alloc).toMatchObject({ status: "completed", value: 50 });
    }
  }

  it("a program that exhausts its memory, run 12 times under mixed load, fails with the memory error every time (1 thread)", async () => {
    await underMixedLoad(stack);
  });

  it("a program that exhausts its memory, run 12 times under mixed load, fails with the memory error every time (2 threads)", async () => {
    const two = await startStack(["--threads", "2"]);
    try {
      await underMixedLoad(two);
    } finally {
      expect(await two.stop()).toBe(0);
    }
  });
});

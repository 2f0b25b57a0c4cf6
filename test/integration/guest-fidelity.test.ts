/**
 * Guest fidelity against a real `codemode start`: the everyday globals model code
 * expects (timers, URL, encoding, base64, structuredClone, a browser-like console),
 * completion only when no work is pending, a prelude guest code cannot subvert (red-team
 * tests by category: prototype pollution of every built-in the bridge touches, forged
 * bridge messages, self-settling, getters and proxies in inputs), and error positions in
 * the model's own source.
 */
import { createHash } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gatewayExec, openRun, type TestTool } from "../helpers/gateway.js";
import { execute, logged, startStack, waitFor, type Stack } from "../helpers/harness.js";
import { until } from "../helpers/until.js";

const TOOLS: TestTool[] = [
  { name: "echo", description: "Returns its input.", handler: (input) => ({ got: input }) },
  { name: "slow", description: "Answers after a while.", handler: async () => (await new Promise((r) => setTimeout(r, 400)), "slow done") },
];

let stack: Stack;
let scope: Awaited<ReturnType<typeof openRun>>["scope"];
beforeAll(async () => {
  stack = await startStack();
  scope = (await openRun(stack, TOOLS)).scope;
});
afterAll(async () => {
  expect(await stack.stop()).toBe(0);
});

const run = (code: string, config: Record<string, unknown> = {}, tools: TestTool[] = TOOLS) => gatewayExec(stack, scope, tools, code, config);

type Steps = Awaited<ReturnType<Stack["control"]["getTrajectory"]>>["steps"];
/** The run's trajectory once `ready` holds for it (a segment's record reaches the orchestrator after its result). */
async function stepsOnceThere(of: typeof scope, ready: (steps: Steps) => boolean): Promise<Steps> {
  let steps: Steps = [];
  return until(async () => ready((steps = (await stack.control.getTrajectory({ scope: of })).steps)) && steps, "the trajectory's steps", {
    everyMs: 100,
    detail: () => JSON.stringify(steps, (_, v: unknown) => (typeof v === "bigint" ? String(v) : v)),
  });
}
const texts = (output: unknown[] | undefined) => (output ?? []).map((o) => (o as { text: string }).text);

describe("everyday globals", () => {
  it("setTimeout, URL and TextEncoder are functions", async () => {
    const out = await run(`return [typeof setTimeout, typeof URL, typeof TextEncoder]`);
    expect(out.model.value).toEqual(["function", "function", "function"]);
  });

  it("timers run in order, can be cleared, pass arguments, and intervals repeat", async () => {
    const out = await run(`
      const seen = [];
      setTimeout((x) => seen.push("b" + x), 30, 1);
      setTimeout(() => seen.push("a"), 10);
      const cancelled = setTimeout(() => seen.push("never"), 20);
      clearTimeout(cancelled);
      let n = 0;
      const id = setInterval(() => { if (++n === 3) clearInterval(id); }, 5);
      await new Promise((r) => setTimeout(r, 60));
      queueMicrotask(() => seen.push("micro"));
      await null;
      return { seen, n, ids: typeof id };`);
    expect(out.model.value).toEqual({ seen: ["a", "b1", "micro"], n: 3, ids: "number" });
  });

  it("an armed timer is pending work: the exec completes only after it fired", async () => {
    const out = await run(`setTimeout(() => text("fired"), 50); return "value"`);
    expect(out.model).toMatchObject({ status: "completed", value: "value", output: [{ type: "text", text: "fired" }] });
  });

  it("a timer due after timeoutMs suspends the run, and wait fires it", async () => {
    const first = await run(`setTimeout(() => text("later"), 1500); return "v"`, { timeoutMs: 300 });
    expect(first.model).toMatchObject({ status: "waiting", reason: "pending_tools" });
    expect(first.model.pendingToolCalls).toBeUndefined();
    // Each wait waits up to timeoutMs (300 ms) for the timer, as it would for an answer.
    let resumed = await waitFor(stack.sandbox, { scope, runId: first.model.runId! });
    let waits = 1;
    while (resumed.model.status === "waiting" && waits < 20) {
      resumed = await waitFor(stack.sandbox, { scope, runId: first.model.runId! });
      waits++;
    }
    expect(waits).toBeGreaterThan(1);
    expect(resumed.model).toMatchObject({ status: "completed", value: "v", output: [{ type: "text", text: "later" }] });
  });

  it("timers are bounded, refuse strings, and a throwing callback fails the run", async () => {
    const bounded = await run(
      `const ids = []; try { for (let i = 0; i < 200; i++) ids.push(setTimeout(() => {}, 1)); } catch (e) { return [ids.length, e.name, e.message]; }`,
    );
    expect(bounded.model.value).toEqual([100, "RangeError", "too many timers (at most 100 may be armed at once)."]);
    const str = await run(`try { setTimeout("alert(1)", 1); } catch (e) { return e.message; }`);
    expect(str.model.value).toMatch(/needs a function/);
    const thrown = await run(`setTimeout(() => { throw new TypeError("in timer") }, 5); return 1`);
    expect(thrown.model).toMatchObject({ status: "failed", error: expect.stringMatching(/^TypeError: in timer/) });
  });

  it("URL and URLSearchParams follow WHATWG, with live searchParams", async () => {
    const out = await run(`
      const u = new URL("../a?b=1#c", "https://Example.com:443/x/y/z");
      u.searchParams.append("q", "x y");
      const p = new URLSearchParams({ a: "1", b: "two" });
      let bad; try { new URL("not a url"); } catch (e) { bad = e.name; }
      return [u.href, u.hostname, u.searchParams.get("b"), p.toString(), bad];`);
    expect(out.model.value).toEqual(["https://example.com/x/a?b=1&q=x+y#c", "example.com", "1", "a=1&b=two", "TypeError"]);
  });

  it("TextEncoder/TextDecoder (UTF-8, streaming, fatal), atob/btoa and structuredClone", async () => {
    const out = await run(`
      const bytes = new TextEncoder().encode("héllo€😀");
      const d = new TextDecoder();
      const streamed = d.decode(new Uint8Array([0xe2, 0x82]), { stream: true }) + d.decode(new Uint8Array([0xac]));
      let fatal; try { new TextDecoder("utf-8", { fatal: true }).decode(new Uint8Array([0xff])); } catch (e) { fatal = e.name; }
      let badB64; try { atob("a"); } catch (e) { badB64 = e.name; }
      let latin; try { btoa("€"); } catch (e) { latin = e.name; }
      const o = { a: [1, { d: new Date(0) }], m: new Map([["k", new Set([1])]]) };
      o.self = o;
      const c = structuredClone(o);
      let fn; try { structuredClone({ f() {} }); } catch (e) { fn = e.name; }
      return [bytes.length, new TextDecoder().decode(bytes), streamed, fatal, btoa("hello"), atob(" aGVs bG8= "), badB64, latin,
        c !== o && c.self === c, c.a[1].d instanceof Date, c.m.get("k").has(1), fn];`);
    expect(out.model.value).toEqual([
      13,
      "héllo€😀",
      "€",
      "TypeError",
      "aGVsbG8=",
      "hello",
      "InvalidCharacterError",
      "InvalidCharacterError",
      true,
      true,
      true,
      "DataCloneError",
    ]);
  });

  it("console formats like a browser console and never throws on hostile values", async () => {
    const out = await run(`
      const hostile = { get boom() { throw new Error("getter ran") }, ok: 1 };
      const trap = new Proxy({}, { ownKeys() { throw new Error("trap") } });
      const cyc = { name: "c" }; cyc.self = cyc;
      console.log(undefined, null, -0, 10n, "s", [1, undefined], { a: "x" }, new Map([[1, 2]]), new Set([3]), Symbol("q"), function named() {});
      console.log(hostile, trap, cyc, new Error("e1"));
      console.info("info"); console.debug("dbg"); console.warn("w %s=%d%%", "x", 42); console.error("bad");
      console.dir({ deep: { deeper: { deepest: 1 } } });
      console.table([{ a: 1, b: "x" }, { a: 2 }]);
      console.assert(1 === 2, "not equal");
      console.count(); console.count();
      return "ok";`);
    expect(out.model.status).toBe("completed");
    expect(texts(out.model.output)).toEqual([
      'undefined null -0 10n s [1, undefined] { "a": "x" } Map(1) { 1 => 2 } Set(1) { 3 } Symbol(q) [Function: named]',
      '{ "boom": [Getter], "ok": 1 } [Unprintable] { "name": "c", "self": [Circular] } Error: e1',
      "info",
      "[debug] dbg",
      "[warn] w x=42%",
      "[error] bad",
      '{ "deep": { "deeper": { "deepest": 1 } } }',
      '┌─────────┬───┬─────┐\n│ (index) │ a │ b   │\n├─────────┼───┼─────┤\n│ 0       │ 1 │ "x" │\n│ 1       │ 2 │     │\n└─────────┴───┴─────┘',
      "[error] Assertion failed: not equal",
      "default: 1",
      "default: 2",
    ]);
  });
});

describe("completion: only when no work is pending", () => {
  it("a call left pending when the value settles is still run and awaited", async () => {
    const out = await run(`tools.slow({}).then((r) => text(r)); return 1`);
    expect(out.model).toMatchObject({ status: "completed", value: 1, output: [{ type: "text", text: "slow done" }] });
    expect(out.answered.map((a) => a.call.toolName)).toEqual(["slow"]);
  });

  it("a pending call past timeoutMs suspends as waiting, and wait completes with the settled value", async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => (release = r));
    const tools = TOOLS.map((t) => (t.name === "slow" ? { ...t, handler: async () => (await gate, "eventually") } : t));
    // The gateway answers once the exec has returned waiting (the sidecar logs the result it sent).
    const returned = logged(stack.proc, new RegExp(`"agentRunId":"${scope.agentRunId}".*"status":"waiting".*"msg":"exec finished"`), {
      ms: 30_000,
      from: stack.proc.stderr.length,
    }).finally(release);
    const first = await run(`tools.slow({}).then((r) => text(r)); return "settled before the call"`, { timeoutMs: 300 }, tools);
    await returned;
    expect(first.model).toMatchObject({ status: "waiting", pendingToolCalls: [expect.objectContaining({ toolId: "openclaw:core:slow" })] });
    const resumed = await waitFor(stack.sandbox, { scope, runId: first.model.runId! });
    expect(resumed.model).toMatchObject({ status: "completed", value: "settled before the call", output: [{ type: "text", text: "eventually" }] });
  });
});

describe("a prelude guest code cannot subvert", () => {
  it("prototype pollution of every built-in the bridge touches changes nothing it sends", async () => {
    const out = await run(`
      Object.defineProperty(Array.prototype, "0", { set(v) { globalThis.stolen = v }, get() { return "poisoned" }, configurable: true });
      Object.defineProperty(Array.prototype, "1", { get() { return "inherited" }, configurable: true });
      Object.prototype.toJSON = function () { return "hijacked" };
      Array.prototype.toJSON = function () { return "hijacked array" };
      Function.prototype.call = function () { throw new Error("call patched") };
      Function.prototype.apply = function () { throw new Error("apply patched") };
      Promise.prototype.then = function () { throw new Error("then patched") };
      JSON.stringify = () => "stringify patched";
      JSON.parse = () => "parse patched";
      Object.keys = () => ["forged"];
      Date.prototype.toISOString = () => "date patched";
      Map.prototype.forEach = function () { throw new Error("forEach patched") };
      Array.prototype.push = function () { throw new Error("push patched") };
      Array.prototype.join = function () { return "join patched" };
      Object.getOwnPropertyDescriptor = () => ({ value: "forged" });
      const input = { list: [1, 2], when: new Date(0), map: new Map([["k", 1]]), sparse: [ , 5] };
      const r = await tools.echo(input);
      console.log("still", { a: 1 });
      return { r, stolen: globalThis.stolen === undefined };`);
    expect(out.model.status).toBe("completed");
    expect(out.answered[0]!.input).toEqual({ list: [1, 2], when: "1970-01-01T00:00:00.000Z", map: [["k", 1]], sparse: [null, 5] });
    expect(out.model.value).toEqual({ r: { got: { list: [1, 2], when: "1970-01-01T00:00:00.000Z", map: [["k", 1]], sparse: [null, 5] } }, stolen: true });
    expect(texts(out.model.output)).toEqual(['still { "a": 1 }']);
  });

  it("no internal binding is reachable: nothing on globalThis, and a run cannot settle itself", async () => {
    const out = await run(`
      const names = Object.getOwnPropertyNames(globalThis).filter((n) => n.startsWith("__"));
      const syms = Object.getOwnPropertySymbols(globalThis).map(String);
      return { names, syms, deliver: typeof __cm_deliver, run: typeof __cm_run, host: typeof __cm_host_async };`);
    expect(out.model.value).toEqual({ names: [], syms: ["Symbol(Symbol.toStringTag)"], deliver: "undefined", run: "undefined", host: "undefined" });
  });

  it("forged settlement attempts do not end the run early: its own value wins", async () => {
    const out = await run(`
      for (const n of Object.getOwnPropertyNames(globalThis)) {
        const v = globalThis[n];
        if (typeof v === "function" && /deliver|run|settle/i.test(n)) { try { v("", true, "1") } catch (_) {} }
      }
      await tools.echo({ n: 1 });
      return "genuine";`);
    expect(out.model).toMatchObject({ status: "completed", value: "genuine" });
  });

  it("an input's own getter runs once, as JSON.stringify would; proxies whose traps throw fail only that call", async () => {
    const out = await run(`
      let ran = 0;
      const withGetter = { get secret() { ran++; return "x" }, plain: 1 };
      const a = await tools.echo(withGetter);
      let caught;
      try { await tools.echo(new Proxy({}, { ownKeys() { throw new Error("trap says no") } })); } catch (e) { caught = e.message; }
      const huge = []; huge.length = 2 ** 32 - 1;
      let big;
      try { await tools.echo({ huge }); } catch (e) { big = e.name; }
      return { a, ran, caught, big };`);
    expect(out.model.value).toEqual({ a: { got: { secret: "x", plain: 1 } }, ran: 1, caught: "trap says no", big: "RangeError" });
    expect(out.answered).toHaveLength(1);
  });

  it("marshaling types values by their engine slots and leaves the guest's stack trace limit as the guest set it", async () => {
    // The bridge checks a value's type with engine errors it throws and catches, made
    // without stacks (the engine's limit is 0 meanwhile); the guest sees its own limit
    // before, after, and inside a toJSON the bridge calls.
    const out = await run(`
      Error.stackTraceLimit = 3;
      const deep = (n) => (n === 0 ? new Error("x").stack.split("\\n").length : deep(n - 1));
      const seen = [];
      const masked = Object.setPrototypeOf(new Map([["k", 1]]), Object.prototype);
      const dateAsArray = Object.setPrototypeOf(new Date(0), Array.prototype);
      const input = {
        masked, dateAsArray, list: new Proxy([1, 2], {}), bytes: new Uint8Array(2), set: new Set([1]),
        probe: { toJSON() { seen.push(Error.stackTraceLimit, deep(10)); return "probed"; } },
      };
      const r = await tools.echo(input);
      console.log(new Map([[1, new Date(0)]]), [new Set([2])]);
      return { got: r.got, seen, after: Error.stackTraceLimit, lines: deep(10) };`);
    expect(out.model.status).toBe("completed");
    expect(out.model.value).toEqual({
      got: { masked: [["k", 1]], dateAsArray: "1970-01-01T00:00:00.000Z", list: [1, 2], bytes: "[Binary]", set: [1], probe: "probed" },
      seen: [3, 4],
      after: 3,
      lines: 4,
    });
    expect(texts(out.model.output)).toEqual(["Map(1) { 1 => 1970-01-01T00:00:00.000Z } [Set(1) { 2 }]"]);
  });
});

describe("error positions in the model's own source", () => {
  it("point at the model's line and column, in JavaScript and TypeScript", async () => {
    const js = await run("const o = null;\nconst p = 2;\n  return o.x");
    expect(js.model.error).toBe("TypeError: cannot read property 'x' of null (line 3, column 10)");
    const tsRun = await stack.sandbox.exec({ scope, code: "const o: any = null;\ninterface X { y: string }\n  return o.x", language: "typescript" });
    let model: { error?: string } = {};
    for await (const ev of tsRun) if (ev.event.case === "result") model = JSON.parse(ev.event.value.modelJson) as { error?: string };
    expect(model.error).toBe("TypeError: cannot read property 'x' of null (line 3, column 10)");
    const deep = await run("function g() {\n  return undefined.y;\n}\nreturn g()");
    expect(deep.model.error).toBe("TypeError: cannot read property 'y' of undefined (line 2, column 10)");
    // QuickJS records no position here; the one matching access in the source gives it.
    const literal = await run("const a = 1;\nconst b = 2;\nreturn null.x");
    expect(literal.model.error).toBe("TypeError: cannot read property 'x' of null (line 3, column 8)");
    // Two candidates and no position from QuickJS: no guess.
    const twice = await run("return Math.random() < 2 ? null.x : null.x");
    expect(twice.model.error).toBe("TypeError: cannot read property 'x' of null");
  });
});

describe("TypeScript error positions: the model's own column, with annotations earlier on the line", () => {
  const ts = async (code: string) => (await execute(stack, { scope, code, language: "typescript" })).model.error;
  const js = async (code: string) => (await run(code)).model.error;
  // Each TypeScript program, and the same program with its type syntax blanked out by hand:
  // both must report the same message and position.
  const CASES: Array<[string, string, string]> = [
    ["const o: any = null; return o.x", "const o      = null; return o.x", "TypeError: cannot read property 'x' of null (line 1, column 29)"],
    [
      "const a: number = 1, b: Record<string, number> = {}; const o: { x: number } | null = null as any; return o!.x",
      "const a         = 1, b                         = {}; const o                       = null       ; return o .x",
      "TypeError: cannot read property 'x' of null (line 1, column 106)",
    ],
    [
      "function f(a: Map<string, number>, b: string): number { return (b as any).z.w }\nreturn f(new Map(), 'x')",
      "function f(a                     , b        )         { return (b       ).z.w }\nreturn f(new Map(), 'x')",
      "TypeError: cannot read property 'w' of undefined (line 1, column 65)",
    ],
    ["const x = <any>null; return x!.y", "const x =      null; return x .y", "TypeError: cannot read property 'y' of null (line 1, column 29)"],
    [
      "const n: number = 1; throw new Error(`boom ${n as number}` as string)",
      "const n         = 1; throw new Error(`boom ${n          }`          )",
      "Error: boom 1 (line 1, column 46)",
    ],
    [
      "const s: string = 'a: b'; /* c: d */ const u: { k?: string } = {}; return u.k!.length",
      "const s         = 'a: b'; /* c: d */ const u                 = {}; return u.k .length",
      "TypeError: cannot read property 'length' of undefined (line 1, column 75)",
    ],
  ];
  for (const [tsCode, jsCode, message] of CASES) {
    it(`${tsCode.split("\n")[0]!.slice(0, 60)}…`, async () => {
      expect(await ts(tsCode)).toBe(message);
      expect(await js(jsCode)).toBe(message);
    });
  }

  it("a property read on a literal null has its position in TypeScript and JavaScript, cast or parenthesized", async () => {
    expect(await ts("const a: number = 1;\nreturn (null as any).y")).toBe("TypeError: cannot read property 'y' of null (line 2, column 9)");
    expect(await ts("const a: number = 1; return (<any>null)['y']")).toBe("TypeError: cannot read property 'y' of null (line 1, column 35)");
    expect(await js("const o = null;\nreturn (o).x")).toBe("TypeError: cannot read property 'x' of null (line 2, column 9)");
    // A call's result is no literal: no position is guessed.
    expect(await js("function f(v) { return v }\nreturn f(null).x")).toBe("TypeError: cannot read property 'x' of null");
  });

  it("a syntax error keeps the model's position", async () => {
    expect(await ts("const n: number = 1; const q: string = ; return 1")).toBe("TypeScript SyntaxError: Unexpected token (line 1, column 40)");
    expect(await ts("const n: number = 1; let y: number = 1; let y: string = 'b'")).toBe(
      await js("const n         = 1; let y         = 1; let y         = 'b'"),
    );
  });
});

describe("trajectory and telemetry that tell the truth", () => {
  it("records answers delivered while suspended, the model's input and result, and cancelled segments", async () => {
    const opened = await openRun(stack, TOOLS);
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => (release = r));
    const tools = TOOLS.map((t) => (t.name === "slow" ? { ...t, handler: async () => (await gate, "late answer") } : t));
    // The gateway answers once the exec has returned waiting (the sidecar logs the result it sent).
    const returned = logged(stack.proc, new RegExp(`"agentRunId":"${opened.scope.agentRunId}".*"status":"waiting".*"msg":"exec finished"`), {
      ms: 30_000,
      from: stack.proc.stderr.length,
    }).finally(release);
    const first = await gatewayExec(stack, opened.scope, tools, `return await tools.slow({})`, { timeoutMs: 300 });
    await returned;
    expect(first.model.status).toBe("waiting");
    const done = await waitFor(stack.sandbox, { scope: opened.scope, runId: first.model.runId! });
    expect(done.model).toMatchObject({ status: "completed", value: "late answer" });

    // A long input keeps only its size and hash.
    const long = `return ${JSON.stringify("x".repeat(70_000))}.length`;
    await gatewayExec(stack, opened.scope, tools, long);

    // The gateway cancels an exec whose guest computes: the step says cancelled.
    const controller = new AbortController();
    const stream = stack.sandbox.exec(
      { scope: opened.scope, execCallId: "cancelled-exec", code: `text("computing"); for (;;) {}`, config: { timeoutMs: 1500 } },
      { signal: controller.signal },
    );
    await expect(
      (async () => {
        // Cancelled once the guest runs (its output streamed).
        for await (const ev of stream) if (ev.event.case === "output") controller.abort();
      })(),
    ).rejects.toMatchObject({ name: "ServiceError", message: expect.stringMatching(/cancelled on client/i) });

    const steps = await stepsOnceThere(opened.scope, (ss) => ss.some((s) => s.callId === "cancelled-exec"));
    const [exec, wait, big, cancelled] = steps;
    expect(exec).toMatchObject({ kind: "exec", status: "waiting" });
    expect(exec!.nestedCalls[0]).toMatchObject({ toolId: "openclaw:core:slow", outcome: "ok", answeredWhileSuspended: true });
    // The call's time runs to its answer, which came after the exec had ended: the call ends after its exec.
    const call = exec!.nestedCalls[0]!;
    expect(Number(call.startedAtMs) + call.durationMs).toBeGreaterThan(Number(exec!.startedAtMs) + exec!.durationMs);
    expect(JSON.parse(exec!.input!.text)).toEqual({ code: "return await tools.slow({})" });
    expect(JSON.parse(exec!.result!.text)).toMatchObject({ status: "waiting", runId: first.model.runId });
    expect(wait).toMatchObject({ kind: "wait", status: "completed" });
    expect(JSON.parse(wait!.input!.text)).toEqual({ runId: first.model.runId });
    expect(JSON.parse(wait!.result!.text)).toMatchObject({ status: "completed", value: "late answer" });
    expect(big!.input).toMatchObject({ text: "", bytes: BigInt(Buffer.byteLength(JSON.stringify({ code: long }))) });
    expect(big!.input!.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(cancelled).toMatchObject({ kind: "exec", status: "cancelled" });
  });

  it("a call left pending when the program throws is recorded as abandoned", async () => {
    const opened = await openRun(stack, TOOLS);
    const out = await gatewayExec(stack, opened.scope, TOOLS, `tools.slow({}); throw new Error("boom")`, {}, { refusals: "return" });
    expect(out.model).toMatchObject({ status: "failed", error: expect.stringMatching(/^Error: boom/) });
    // The gateway's answer came after the exec ended: refused, and said so.
    expect(out.refused.map((r) => [r.call.toolName, r.code])).toEqual([["slow", "failed_precondition"]]);
    const steps = await stepsOnceThere(opened.scope, (ss) => ss[0]?.nestedCalls[0]?.outcome === "abandoned");
    expect(steps[0]).toMatchObject({ kind: "exec", status: "failed" });
    expect(steps[0]!.nestedCalls).toHaveLength(1);
    expect(steps[0]!.nestedCalls[0]).toMatchObject({ toolId: "openclaw:core:slow", outcome: "abandoned" });
  });

  it("a result over the replay bound (64 KiB) is kept as its size and sha256", async () => {
    const opened = await openRun(stack, TOOLS);
    const out = await gatewayExec(stack, opened.scope, TOOLS, `return "y".repeat(70000)`, { maxOutputBytes: 200_000 });
    expect(out.model).toMatchObject({ status: "completed" });
    const modelJson = out.result.modelJson;
    expect(Buffer.byteLength(modelJson)).toBeGreaterThan(64 * 1024);
    const steps = await stepsOnceThere(opened.scope, (ss) => ss[0]?.result !== undefined);
    expect(steps[0]!.result).toMatchObject({
      text: "",
      bytes: BigInt(Buffer.byteLength(modelJson)),
      sha256: createHash("sha256").update(modelJson).digest("hex"),
    });
    // The input is small and kept as it is.
    expect(JSON.parse(steps[0]!.input!.text)).toEqual({ code: `return "y".repeat(70000)` });
  });

  it("direct exposure gives unique model-visible names, derived from catalog ids when names collide", async () => {
    const tools: TestTool[] = [
      { name: "search", description: "Core search." },
      { name: "search", owner: "docs", origin: "external_plugin", description: "Docs search." },
      { name: "search", source: "mcp", owner: "web", description: "Web search." },
      { name: "message", description: "Send a message." },
    ];
    const { response } = await openRun(stack, tools, {}, { config: { enabled: false } });
    const defs = response.surface!.tools.map((t) => [t.name, t.toolId]);
    expect(defs).toEqual([
      ["message", "openclaw:core:message"],
      ["openclaw__core__search", "openclaw:core:search"],
      ["openclaw__docs__search", "openclaw:docs:search"],
      ["mcp__web__search", "mcp:web:search"],
    ]);
    expect(new Set(defs.map((d) => d[0])).size).toBe(defs.length);
  });
});

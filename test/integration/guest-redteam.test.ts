/**
 * Red-team tests of the guest preludes against a real `codemode start`, for the routes an
 * audit found into the prelude after its first hardening: stack-trace hooks that hand the
 * guest the prelude's own functions (`Error.prepareStackTrace` call sites with
 * getFunction/getThis), Object.prototype pollution of property-descriptor and option
 * keys (read by every `Object.defineProperty` the prelude made with a literal), and a
 * guest species constructor on Promise (read by every `then` the prelude made). Each
 * program is one a hostile model could write; each must change nothing the prelude does.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toWireTool } from "../../src/shared/tool-wire.js";
import { gatewayExec, openRun, type TestTool } from "../helpers/gateway.js";
import { scope as newScope, startStack, waitFor, type Stack } from "../helpers/harness.js";
import { until } from "../helpers/until.js";

const TOOLS: TestTool[] = [
  { name: "echo", description: "Returns its input.", handler: (input) => ({ got: input }) },
  {
    name: "fail",
    description: "Always fails.",
    handler: () => {
      const e = new Error("the tool refused");
      e.name = "ToolRefused";
      throw e;
    },
  },
  { name: "slow", description: "Answers after a while.", handler: async () => (await new Promise((r) => setTimeout(r, 700)), "slow done") },
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

const run = (code: string, config: Record<string, unknown> = {}) => gatewayExec(stack, scope, TOOLS, code, config);
const texts = (output: unknown[] | undefined) => (output ?? []).map((o) => (o as { text: string }).text);

/** A hook that records every function and receiver its call sites reveal (none may be revealed). */
const COLLECTING_HOOK = `
  const fns = [], receivers = [], names = new Set();
  Error.prepareStackTrace = (e, sites) => {
    for (const s of sites) {
      names.add(s.getFunctionName());
      const f = s.getFunction();
      if (f !== undefined && !fns.includes(f)) fns.push(f);
      const t = typeof s.getThis === "function" ? s.getThis() : undefined;
      if (t !== undefined) receivers.push(t);
    }
    return "hooked";
  };`;

describe("stack traces reveal no prelude function or receiver", () => {
  it("a hook's call sites give no function and no this: tool errors, marshaling, descriptors, captureStackTrace, timers", async () => {
    const out = await run(`${COLLECTING_HOOK}
      // An inherited descriptor key read while the prelude defines a property (the tool error's name).
      Object.defineProperty(Object.prototype, "enumerable", { get() { new Error("probe"); return false; }, configurable: true });
      let toolError;
      try { await tools.fail({}); } catch (e) { toolError = [e.name, e.message, e.stack]; }
      delete Object.prototype.enumerable;
      // A proxy trap runs while the prelude marshals a tool input.
      await tools.echo(new Proxy({ a: 1 }, { ownKeys(t) { new Error("trap"); return Reflect.ownKeys(t); } }));
      const holder = {};
      Error.captureStackTrace(holder);
      await new Promise((r) => setTimeout(() => { new Error("in timer"); r(); }, 1));
      queueMicrotask(() => { new Error("in microtask"); });
      await null;
      return { fns: fns.length, receivers: receivers.length, sawPreludeFrames: names.has("run") || names.has("request"), toolError, captured: holder.stack };`);
    expect(out.model.status).toBe("completed");
    expect(out.model.value).toEqual({
      fns: 0,
      receivers: 0,
      sawPreludeFrames: true,
      toolError: ["ToolRefused", "the tool refused", "hooked"],
      captured: "hooked",
    });
  });

  it("a result proxy whose trap calls what the call sites revealed cannot settle the exec with a forged value", async () => {
    const out = await run(`
      const fns = [];
      Error.prepareStackTrace = (e, sites) => {
        for (const s of sites) { const f = s.getFunction(); if (typeof f === "function" && s.getFileName() !== "cell.js" && !fns.includes(f)) fns.push(f); }
        return "";
      };
      let calls = 0;
      const forgeries = [["forged"], [true, '"forged"'], ["", true, '"forged"'], ["1", true, '"forged"'], ['{"forged":1}']];
      return new Proxy({}, {
        ownKeys() {
          new Error("collect");
          for (const f of fns) for (const args of forgeries) { try { f(...args); calls++; } catch (_) {} }
          return ["genuine"];
        },
        getOwnPropertyDescriptor() { return { value: "yes", writable: true, enumerable: true, configurable: true }; },
      });`);
    expect(out.model).toMatchObject({ status: "completed", value: { genuine: "yes" } });
    expect(out.answered).toHaveLength(0);
  });

  it("Error.prepareStackTrace still works as model code expects, and cannot be redefined", async () => {
    const out = await run(`
      Error.prepareStackTrace = (e, sites) => e.name + "|" + sites.map((s) =>
        [s.getFileName(), s.getLineNumber() > 0, typeof s.getColumnNumber(), typeof s.getFunctionName(), s.isNative(), s.getFunction(), s.getThis()].join(":")).join(";");
      function inner() { return new TypeError("x").stack; }
      const custom = inner();
      const hook = typeof Error.prepareStackTrace;
      Error.prepareStackTrace = undefined;
      const plain = new Error("y").stack;
      let redefine;
      try { Object.defineProperty(Error, "prepareStackTrace", { value: () => "mine" }); } catch (e) { redefine = e.name; }
      const deleted = delete Error.prepareStackTrace;
      let foreign;
      try { Object.getPrototypeOf((() => { let cs; Error.prepareStackTrace = (e, s) => (cs = s, ""); new Error(); Error.prepareStackTrace = undefined; return cs[0]; })()).getFileName.call({}); } catch (e) { foreign = e.name; }
      return { first: custom.split(";")[0], hook, plain: /^    at inner|^    at <anonymous> \\(cell\\.js:/.test(plain), redefine, deleted, foreign };`);
    expect(out.model.value).toEqual({
      first: "TypeError|cell.js:true:number:string:false::",
      hook: "function",
      plain: true,
      redefine: "TypeError",
      deleted: false,
      foreign: "TypeError",
    });
  });

  it("the guard survives a suspension: after wait, the hook still gets call sites without functions", async () => {
    const first = await run(
      `${COLLECTING_HOOK}
      await tools.slow({});
      const stack = new Error("after resume").stack;
      text(new Proxy({}, { ownKeys() { new Error("trap while marshaling"); return []; } }));
      return { stack, fns: fns.length, receivers: receivers.length };`,
      { timeoutMs: 200 },
    );
    expect(first.model.status).toBe("waiting");
    // The model waits again while the tool has not answered.
    const resumed = await until(async () => {
      const w = await waitFor(stack.sandbox, { scope, runId: first.model.runId! });
      return w.model.status !== "waiting" && w;
    }, "the run to leave waiting");
    expect(resumed.model).toMatchObject({ status: "completed", value: { stack: "hooked", fns: 0, receivers: 0 } });
  });

  it("a sloppy function the prelude calls sees no caller", async () => {
    const out = await run(`
      const seen = [];
      function cb() { seen.push(cb.caller === null || cb.caller === undefined, arguments.callee === cb); }
      setTimeout(cb, 1);
      await new Promise((r) => setTimeout(r, 5));
      return seen;`);
    expect(out.model.value).toEqual([true, true]);
  });

  it("tool_search_code's prelude is guarded the same way", async () => {
    const s = newScope("rt");
    await stack.control.openRun({
      scope: s,
      catalog: { case: "tools", value: { tools: TOOLS.map(toWireTool) } },
      policy: { allow: [], deny: [], allowNone: false },
      toolSearch: { enabled: true },
    });
    const out = await gatewayExec(
      stack,
      s,
      TOOLS,
      `${COLLECTING_HOOK}
      let err;
      try { await openclaw.tools.call("openclaw:core:fail", {}); } catch (e) { err = e.name; }
      await openclaw.tools.call("openclaw:core:echo", new Proxy({}, { ownKeys() { new Error("trap"); return []; } }));
      return { fns: fns.length, receivers: receivers.length, err };`,
    );
    expect(out.model.value).toEqual({ fns: 0, receivers: 0, err: "ToolRefused" });
  });
});

/** Sets every key a property descriptor or an options bag is read for on Object.prototype. */
const POLLUTE = `
  for (const k of ["get", "set"]) Object.prototype[k] = function () { return "polluted " + k; };
  Object.prototype.value = "polluted";
  for (const k of ["writable", "enumerable", "configurable", "fatal", "stream", "ignoreBOM", "schema"]) Object.prototype[k] = true;
  Object.prototype.limit = 1;`;

/** Uses every prelude path that defines properties or reads options; must not define any itself after POLLUTE. */
const EVERYDAY = `
  const r = {};
  r.echo = await tools.echo({ list: [1, 2], nested: { a: "b" } });
  r.byId = await tools.call("openclaw:core:echo", { n: 1 });
  try { await tools.fail({}); } catch (e) { r.fail = [e.name, e.message, e instanceof Error]; }
  r.keys = Object.keys(tools).includes("echo");
  const d = Object.getOwnPropertyDescriptor(tools, "echo");
  r.desc = [typeof d.value, d.writable, d.enumerable, d.configurable];
  r.found = (await tools.search("input fails", {})).length;
  r.timer = await new Promise((res) => setTimeout((a, b) => res([a, b]), 1, "x", 2));
  let ticks = 0;
  r.interval = await new Promise((res) => { const id = setInterval((step) => { ticks += step; if (ticks >= 3) { clearInterval(id); res(ticks); } }, 1, 1); });
  r.micro = await new Promise((res) => queueMicrotask(() => res("micro")));
  console.log("obj", { a: 1 }, [1, 2], undefined);
  console.table([{ a: 1 }]);
  const u = new URL("https://example.test/p?q=1");
  u.searchParams.append("r", "2");
  r.url = [u.href, new URLSearchParams({ a: "1" }).toString(), new URLSearchParams([["b", "2"]]).toString()];
  r.enc = Array.from(new TextEncoder().encode("hé"));
  r.dec = [new TextDecoder().decode(new Uint8Array([104, 195, 169])), new TextDecoder().fatal, new TextDecoder("utf-8", {}).decode(new Uint8Array([255])), new TextDecoder().decode(new Uint8Array([0xe2, 0x82]), {})];
  const c = structuredClone({ a: [1, { b: 2 }], e: new Error("m"), m: new Map([[1, 2]]) });
  r.clone = [Array.isArray(c.a), c.a.length, c.a[1].b, c.e.name, c.e.message, c.e instanceof Error, c.m.get(1), Object.keys(c)];
  try { atob("*"); } catch (e) { r.atob = [e.name, btoa("ab")]; }
  return r;`;

describe("Object.prototype pollution of descriptor and option keys changes nothing", () => {
  it("tool calls (success and error), timers with arguments, console, URL, encoding and structuredClone behave as without it", async () => {
    const clean = await run(EVERYDAY);
    const polluted = await run(POLLUTE + EVERYDAY);
    expect(clean.model.status).toBe("completed");
    expect(polluted.model.status).toBe("completed");
    expect(polluted.model.value).toEqual(clean.model.value);
    expect(clean.model.value).toMatchObject({
      echo: { got: { list: [1, 2], nested: { a: "b" } } },
      fail: ["ToolRefused", "the tool refused", true],
      desc: ["function", false, true, true],
      found: 2,
      timer: ["x", 2],
      dec: ["hé", false, "\ufffd", "\ufffd"],
      clone: [true, 2, 2, "Error", "m", true, 2, ["a", "e", "m"]],
      atob: ["InvalidCharacterError", "YWI="],
    });
    expect(texts(polluted.model.output)).toEqual(texts(clean.model.output));
    expect(polluted.answered.map((a) => a.input)).toEqual(clean.answered.map((a) => a.input));
  });

  it("a tool error after pollution fails the run with the tool's error, not a TypeError of the prelude", async () => {
    const out = await run(`${POLLUTE}\nawait tools.fail({});\nreturn 1;`);
    expect(out.model).toMatchObject({ status: "failed", error: expect.stringMatching(/^ToolRefused: the tool refused/) });
  });
});

describe("a guest species constructor on Promise", () => {
  it("cannot make the run's completion or queueMicrotask throw", async () => {
    const out = await run(`
      const Never = function () {};
      Object.defineProperty(Promise.prototype, "constructor", { configurable: true, get() { return { [Symbol.species]: Never }; } });
      Object.defineProperty(Promise, Symbol.species, { configurable: true, get() { return Never; } });
      queueMicrotask(() => text("micro ran"));
      setTimeout(() => text("timer ran"), 1);
      return "genuine";`);
    expect(out.model).toMatchObject({ status: "completed", value: "genuine" });
    expect(texts(out.model.output)).toEqual(["micro ran", "timer ran"]);
  });
});

/**
 * Code Mode for MCP spec section 11: resource exhaustion limits, prototype pollution (from
 * the script and from server responses), no host objects in reach, the binding layer and
 * the @codemode/* exports out of the script's reach, and no code generation from strings.
 * One reproduction per defence, through `codemode mcp` over stdio.
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

describe("spec 11: security", () => {
  it("R11-1 resource exhaustion is stopped by limits (time, memory, tool calls) and the host keeps serving", async () => {
    const cpu = await front.run(`for (;;) {}`, { limits: { timeoutMs: 300 } });
    const mem = await front.run(`const big = []; for (;;) big.push(new Array(10000).fill(big.length));`, { limits: { maxMemoryBytes: 8_388_608 } });
    const calls = await front.run(`import { class_ } from "@codemode/servers/fixture"; for (;;) await class_();`, { limits: { maxToolCalls: 10 } });
    for (const r of [cpu, mem, calls]) expect(r.diagnostics.at(-1)).toMatchObject({ code: "SANDBOX_LIMIT", errorClass: "SandboxLimitError" });
    expect(calls.toolTrace).toHaveLength(10);
    expect((await front.run(`globalThis.__codemode_result__ = "alive";`)).result).toBe("alive");
  });

  it("R11-2 a server response cannot pollute prototypes (responses are untrusted input)", async () => {
    const r = await front.run(`
      import { proto } from "@codemode/servers/fixture";
      const v = await proto();
      globalThis.__codemode_result__ = [({}).polluted, v.polluted, Object.getPrototypeOf(v) === Object.prototype, ({}).constructor === Object, Object.prototype.polluted, v.ok];`);
    expect(r.result).toEqual([null, null, true, true, null, 1]);
  });

  it("R11-3 patched built-ins and prototype pollution in the script cannot subvert the binding layer", async () => {
    const r = await front.run(`
      import * as fx from "@codemode/servers/fixture";
      Object.defineProperty(Object.prototype, "structuredContent", { get() { return "HIJACKED"; }, configurable: true });
      Object.defineProperty(Object.prototype, "isError", { get() { return true; }, configurable: true });
      Object.defineProperty(Array.prototype, "0", { set() { throw new Error("index setter ran"); }, configurable: true });
      JSON.stringify = () => '{"text":"forged"}';
      JSON.parse = () => ({ forged: true });
      Object.keys = () => [];
      Promise.prototype.then = function () { throw new Error("then ran"); };
      Function.prototype.call = Function.prototype.apply = () => { throw new Error("call ran"); };
      const text = await fx.echo_v2({ text: "genuine" });
      const weather = await fx.weather({ city: "Oslo" });
      globalThis.__codemode_result__ = { text, city: Reflect.getOwnPropertyDescriptor(weather, "city").value };`);
    expect(r.diagnostics).toEqual([]);
    expect(r.result).toEqual({ text: "genuine", city: "Oslo" });
  });

  it("R11-4 no host object, host function or internal binding is reachable from the script", async () => {
    const r = await front.run(`
      const names = Object.getOwnPropertyNames(globalThis);
      const hostish = names.filter((n) => /^__cm|host|deliver|^require$|^process$|^module$/i.test(n));
      const { listServers } = await import("@codemode/discovery");
      globalThis.__codemode_result__ = { hostish, source: Function.prototype.toString.call(listServers).includes("request") };`);
    const res = r.result as { hostish: string[]; source: boolean };
    expect(res.hostish).toEqual([]);
    expect(res.source).toBe(false);
  });

  it("R11-5 the @codemode/* module exports cannot be tampered with", async () => {
    const r = await front.run(`
      import * as fx from "@codemode/servers/fixture";
      import * as discovery from "@codemode/discovery";
      import * as errors from "@codemode/errors";
      const attempts = [
        () => { fx.echo_v2 = () => "fake"; },
        () => { delete fx.echo_v2; },
        () => Object.defineProperty(fx, "echo_v2", { value: () => "fake" }),
        () => { fx.__meta__.tools.push({ toolName: "x", exportName: "x" }); },
        () => { fx.__meta__.serverId = "other"; },
        () => { discovery.listServers = async () => []; },
        () => { errors.ToolCallError.prototype.hint = "fake"; },
        () => { errors.CodemodeError = class {}; },
        () => { fx.echo_v2.call = () => "fake"; },
      ];
      const refused = attempts.map((f) => { try { f(); return false; } catch (e) { return e instanceof TypeError; } });
      const again = await import("@codemode/servers/fixture");
      globalThis.__codemode_result__ = { refused, same: again === fx, echo: await again.echo_v2({ text: "intact" }), servers: (await discovery.listServers()).length };`);
    expect(r.result).toEqual({ refused: [true, true, true, true, true, true, true, true, true], same: true, echo: "intact", servers: 2 });
  });

  it("R11-6 no code generation from strings: eval, Function, AsyncFunction and string timers are unavailable", async () => {
    const r = await front.run(`
      const tries = [
        () => eval("1"),
        () => new Function("return 1")(),
        () => Function("return 1")(),
        () => (async function () {}).constructor("return 1"),
        () => (function* () {}).constructor("yield 1"),
        () => setTimeout("globalThis.x = 1", 0),
      ];
      globalThis.__codemode_result__ = [typeof globalThis.eval, tries.map((f) => { try { f(); return "ran"; } catch (e) { return e.name; } })];`);
    expect(r.result).toEqual(["undefined", ["ReferenceError", "TypeError", "TypeError", "TypeError", "TypeError", "TypeError"]]);
  });

  it("R11-7 concurrent invocations are isolated from each other", async () => {
    const [a, b] = await Promise.all([
      front.run(`globalThis.shared = "a"; await new Promise((ok) => setTimeout(ok, 200)); globalThis.__codemode_result__ = globalThis.shared;`),
      front.run(`await new Promise((ok) => setTimeout(ok, 50)); globalThis.__codemode_result__ = typeof globalThis.shared; globalThis.shared = "b";`),
    ]);
    expect([a.result, b.result]).toEqual(["a", "undefined"]);
  });
});

/**
 * Red-team tests of the `codemode.run` prelude (src/sandbox/mcp-run/) against a real
 * `codemode mcp` with real upstream servers: a script that pollutes Object.prototype with
 * the keys a property descriptor, an options bag or an error's fields are read for
 * (get/set/value/writable/enumerable/configurable, hint/path/message/detail/...), adds
 * setters for the names and indexes the prelude fills in on the objects it hands back,
 * and installs a species constructor on Promise, must see exactly what an unpolluted
 * script sees: tool calls (success, isError, JSON-RPC error, refused input), discovery,
 * its own typed errors (caught and uncaught), console, timers, the tool trace. A `then`
 * on Object.prototype is read only where a native async function would read it (once,
 * when the value reaches the script), never by the prelude's internal promises.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startStdioFront, type Front, type RunResponse } from "../helpers/mcp-front.js";

let front: Front;
beforeAll(async () => {
  front = await startStdioFront();
});
afterAll(async () => {
  await front?.close();
});

const IMPORTS = `
import * as fx from "@codemode/servers/fixture";
import { listServers, describeServer, listTools, getTool, searchTools } from "@codemode/discovery";
import { CodemodeError, SchemaValidationError, ToolCallError } from "@codemode/errors";
`;

/** Every key a descriptor, an options bag or an error field is read for, a setter on what the prelude fills in, and a Promise species. */
const POLLUTE = `
  // Accessors first: once Object.prototype.value is set, a literal accessor descriptor is invalid.
  for (const k of ["description", "version"]) Object.defineProperty(Object.prototype, k, { set() { throw new Error("setter " + k + " ran"); }, get() { return undefined; }, configurable: true });
  Object.defineProperty(Array.prototype, "0", { set() { throw new Error("index setter ran"); }, get() { return undefined; }, configurable: true });
  const Never = function () {};
  Object.defineProperty(Promise, Symbol.species, { configurable: true, get() { return Never; } });
  for (const k of ["get", "set"]) Object.prototype[k] = function () { return "polluted " + k; };
  Object.prototype.value = "polluted";
  for (const k of ["writable", "enumerable", "configurable"]) Object.prototype[k] = true;
  Object.prototype.hint = "polluted hint";
  Object.prototype.path = "/polluted";
  Object.prototype.message = "polluted message";
  Object.prototype.detail = "bogus";
  Object.prototype.serverId = "everything";
  Object.prototype.limit = 1;
  Object.prototype.isError = true;
  Object.prototype.structuredContent = "polluted structuredContent";
`;

/** Everything the prelude does for a script after it started (no Promise.prototype.then or push: the script's own species and setters would apply). */
const EVERYDAY = `
  const r = {};
  r.echo = await fx.echo_v2({ text: "genuine" });
  r.weather = await fx.weather({ city: "Oslo" });
  r.multi = await fx.multi();
  try { await fx.fail({ reason: "disk full" }); } catch (e) { r.fail = [e instanceof ToolCallError, e.name, e.message, e.hint, e.serverId, e.toolName, e.exportName, e.result, Object.keys(e).sort(), typeof e.stack]; }
  try { await fx.throws(); } catch (e) { r.throws = [e instanceof ToolCallError, e.name, /the handler threw/.test(e.message), e.hint, Object.keys(e).sort()]; }
  try { await fx.get_item({ id: 7 }); } catch (e) { r.schema = [e instanceof SchemaValidationError, e.name, e.path, e.expected, e.received, e.example, e.hint]; }
  const mine = new ToolCallError("mine", { hint: "my hint", serverId: "fixture" });
  const d = Object.getOwnPropertyDescriptor(mine, "hint");
  r.mine = [mine.name, mine.message, mine.hint, mine.serverId, Object.keys(mine).sort(), d.value, d.writable, d.enumerable, d.configurable];
  const plain = new CodemodeError("plain", {});
  r.plain = [plain.name, plain.hint, Object.keys(plain).sort()];
  r.servers = await listServers();
  r.described = await describeServer("fixture");
  r.tools = await listTools("fixture", { detail: "description" });
  r.names = await listTools("fixture", {});
  r.full = (await listTools("fixture", { detail: "full" })).map((t) => t.toolName);
  r.tool = await getTool("fixture", "echo.v2");
  r.search = (await searchTools("weather", { serverId: "fixture", limit: 2 })).results.map((t) => t.toolName);
  r.searchAll = (await searchTools("weather")).results.length;
  for (const f of [() => getTool("fixture", "nope"), () => listTools("nope"), () => import("@codemode/servers/nope"), () => listTools("fixture", { detail: "x" })]) {
    try { await f(); } catch (e) { r[e.name + "_" + Object.keys(r).length] = [e.message, e.hint, e.toolName, typeof e.stack]; }
  }
  console.log("obj", { a: 1 }, [1, 2], undefined);
  console.warn("careful");
  console.error(new ToolCallError("logged", { hint: "h" }));
  r.timer = await new Promise((res) => setTimeout((a) => res(a), 1, "timer"));
  r.micro = await new Promise((res) => queueMicrotask(() => res("micro")));
  globalThis.__codemode_result__ = r;`;

/** The parts of a response that do not depend on timing. */
function comparable(r: RunResponse) {
  return {
    result: r.result,
    logs: r.logs.map((l) => [l.level, l.message]),
    diagnostics: r.diagnostics,
    toolTrace: (r.toolTrace ?? []).map(({ durationMs: _ms, ...t }) => t),
  };
}

async function cleanAndPolluted(body: string, extra: Record<string, unknown> = {}) {
  // As many lines as POLLUTE, so that positions in diagnostics match.
  const clean = await front.run(IMPORTS + POLLUTE.replace(/[^\n]/g, "") + body, extra);
  const polluted = await front.run(IMPORTS + POLLUTE + body, extra);
  return { clean, polluted };
}

describe("codemode.run: Object.prototype pollution and a Promise species change nothing", () => {
  it("tool calls (success, isError, JSON-RPC error, refused input), discovery, typed errors, console and timers", async () => {
    const { clean, polluted } = await cleanAndPolluted(EVERYDAY);
    expect(clean.diagnostics).toEqual([]);
    expect(comparable(polluted)).toEqual(comparable(clean));
    expect(clean.result).toMatchObject({
      echo: "genuine",
      weather: { city: "Oslo", tempC: 4 },
      fail: [
        true,
        "ToolCallError",
        "fixture.fail failed: it failed: disk full",
        expect.any(String),
        "fixture",
        "fail",
        "fail",
        { isError: true },
        ["exportName", "hint", "result", "serverId", "toolName"],
        "string",
      ],
      throws: [true, "ToolCallError", true, expect.any(String), ["exportName", "hint", "serverId", "toolName"]],
      schema: [true, "SchemaValidationError", "/id", "string", "integer 7", { id: "<id>" }, expect.any(String)],
      mine: ["ToolCallError", "mine", "my hint", "fixture", ["hint", "serverId"], "my hint", true, true, true],
      plain: ["CodemodeError", expect.any(String), ["hint"]],
      search: ["weather"],
      timer: "timer",
      micro: "micro",
    });
    const res = clean.result as {
      servers: unknown[];
      described: { description?: string; version?: string };
      tools: Array<{ description?: string }>;
      tool: { inputSchema?: unknown };
    };
    expect(res.servers).toHaveLength(2);
    expect(res.described).toMatchObject({ serverId: "fixture", description: expect.any(String), version: "3.1.4" });
    expect(res.tools.every((t) => typeof t.description === "string")).toBe(true);
    expect(res.tool.inputSchema).toEqual({ type: "object", properties: { text: { type: "string" } }, required: ["text"] });
    expect(clean.logs.map((l) => l.level)).toEqual(["log", "warn", "error"]);
    expect(clean.toolTrace?.map((t) => [t.toolName, t.ok])).toEqual([
      ["echo.v2", true],
      ["weather", true],
      ["multi", true],
      ["fail", false],
      ["throws", false],
    ]);
  });

  it("an uncaught typed error reports the same diagnostic (class, hint, no inherited path)", async () => {
    const { clean, polluted } = await cleanAndPolluted(`
      console.log("before");
      throw new ToolCallError("typed failure", { hint: "custom hint" });`);
    expect(clean.diagnostics).toHaveLength(1);
    expect(clean.diagnostics[0]).toMatchObject({ errorClass: "ToolCallError", hint: "custom hint" });
    expect(comparable(polluted)).toEqual(comparable(clean));
  });

  it("an uncaught tool error and an uncaught limit error report the same diagnostics", async () => {
    const failing = await cleanAndPolluted(`await fx.fail({ reason: "uncaught" });`);
    expect(failing.clean.diagnostics[0]).toMatchObject({ errorClass: "ToolCallError" });
    expect(comparable(failing.polluted)).toEqual(comparable(failing.clean));
    const limited = await cleanAndPolluted(`await fx.echo_v2({ text: "1" }); await fx.echo_v2({ text: "2" });`, { limits: { maxToolCalls: 1 } });
    expect(limited.clean.diagnostics.map((d) => d.errorClass)).toContain("SandboxLimitError");
    expect(comparable(limited.polluted)).toEqual(comparable(limited.clean));
  });

  it("a species constructor on Promise.prototype.constructor cannot stop the run's completion or a tool call in flight", async () => {
    const body = `
      fx.echo_v2({ text: "in flight" });
      queueMicrotask(() => console.log("micro ran"));
      setTimeout(() => console.log("timer ran"), 1);
      globalThis.__codemode_result__ = "genuine";`;
    const clean = await front.run(IMPORTS + body);
    const polluted = await front.run(`${IMPORTS}
      const Never = function () {};
      Object.defineProperty(Promise.prototype, "constructor", { configurable: true, get() { return { [Symbol.species]: Never }; } });
      Object.defineProperty(Promise, Symbol.species, { configurable: true, get() { return Never; } });
      ${body}`);
    expect(clean.result).toBe("genuine");
    expect(comparable(polluted)).toEqual(comparable(clean));
    expect(polluted.toolTrace?.map((t) => [t.toolName, t.ok])).toEqual([["echo.v2", true]]);
  });

  it("Object.prototype.then is read only where a native async function would read it", async () => {
    const r = await front.run(`${IMPORTS}
      let reads = 0;
      Object.defineProperty(Object.prototype, "then", { configurable: true, get() { reads++; return undefined; } });
      const count = async (f) => { const before = reads; try { await f(); } catch (_) {} return reads - before; };
      const out = {
        nativeObject: await count(async () => ({ a: 1 })),
        nativeString: await count(async () => "s"),
        echo: await count(() => fx.echo_v2({ text: "x" })),
        weather: await count(() => fx.weather({ city: "Oslo" })),
        fail: await count(() => fx.fail({})),
        listServers: await count(() => listServers()),
        describeServer: await count(() => describeServer("fixture")),
        listTools: await count(() => listTools("fixture")),
        listToolsFull: await count(() => listTools("fixture", { detail: "full" })),
        getTool: await count(() => getTool("fixture", "echo.v2")),
        searchTools: await count(() => searchTools("weather")),
      };
      delete Object.prototype.then;
      globalThis.__codemode_result__ = out;`);
    expect(r.diagnostics).toEqual([]);
    expect(r.result).toEqual({
      nativeObject: 1,
      nativeString: 0,
      echo: 0,
      weather: 1,
      fail: 0,
      listServers: 1,
      describeServer: 1,
      listTools: 1,
      listToolsFull: 1,
      getTool: 1,
      searchTools: 1,
    });
  });
});

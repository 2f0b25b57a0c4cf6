/**
 * How guest values cross the bridge, against a real `codemode start`: delivering answers, host
 * errors and the program's result never runs an accessor the guest put on a prototype, and
 * marshalling a value follows `JSON.stringify` of it (an own getter runs exactly once, toJSON
 * gets its key, nothing inherited is sent), through every way a program calls out: tools.x,
 * tools.call, MCP and internal namespaces.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { namespaceTool, serializeNamespaceScope } from "../../src/shared/namespace-scope.js";
import { gatewayExec, openRun, type TestTool } from "../helpers/gateway.js";
import { startStack, waitFor, type Stack } from "../helpers/harness.js";

const ROWS = Array.from({ length: 2000 }, (_, i) => ({ i, name: `row ${i}`, tags: ["a", "b"] }));
const TOOLS: TestTool[] = [
  { name: "echo", description: "Returns its input.", handler: (input) => ({ got: input }) },
  { name: "list", description: "Returns a list.", handler: () => [1, [2, { three: 3 }], "four"] },
  { name: "rows", description: "Returns a large answer (staged).", handler: () => ({ rows: ROWS }) },
  {
    name: "fails",
    description: "Fails.",
    handler: () => {
      throw Object.assign(new Error("disk full"), { name: "DiskError" });
    },
  },
  { name: "slow", description: "Answers late.", handler: async () => (await new Promise((r) => setTimeout(r, 500)), ["late", { n: 1 }]) },
  { name: "create_issue", source: "mcp", owner: "github", description: "Create an issue.", handler: (input) => ({ structuredContent: { sent: input } }) },
  { name: "marshal_echo", owner: "marshal", origin: "external_plugin", description: "Returns its input (namespace).", handler: (input) => ({ got: input }) },
];

let stack: Stack;
let scope: Awaited<ReturnType<typeof openRun>>["scope"];
beforeAll(async () => {
  stack = await startStack();
  await stack.control.registerNamespace({
    namespace: {
      pluginId: "marshal",
      id: "marshal",
      globalName: "Marshal",
      description: "Echo through a namespace.",
      prompt: "Marshal.echo(a, b)",
      requiredToolNames: ["marshal_echo"],
      scopeJson: serializeNamespaceScope({ echo: namespaceTool("marshal_echo", ["a", "b"]) }),
    },
  });
  scope = (await openRun(stack, TOOLS, {}, { mcpServers: [{ name: "github", description: "GitHub." }] })).scope;
});
afterAll(async () => {
  await stack.control.clearNamespaces({ pluginId: "marshal" });
  expect(await stack.stop()).toBe(0);
});

const run = (code: string, config: Record<string, unknown> = {}) => gatewayExec(stack, scope, TOOLS, code, config);
const texts = (output: unknown[] | undefined) => (output ?? []).map((o) => (o as { text: string }).text);

/**
 * Accessors on every prototype the bridge could reach (index setters on Array.prototype,
 * descriptor, payload and error keys on Object.prototype and Error.prototype); each records
 * that it ran in `leaks`. The program reads errors by own descriptor (`own`), so its own reads
 * never reach them.
 */
const TRAP = `
  let leaks = "";
  const own = (o, k) => { const d = Object.getOwnPropertyDescriptor(o, k); return d === undefined ? undefined : d.value; };
  const trap = (proto, key, where) => {
    const d = Object.create(null);
    d.configurable = true;
    d.get = function () { leaks += "get " + where + key + "; "; return undefined; };
    d.set = function (v) { leaks += "set " + where + key + " (" + typeof v + "); "; };
    Object.defineProperty(proto, key, d);
  };
  for (const k of ["0", "1", "2", "3"]) trap(Array.prototype, k, "Array.prototype.");
  for (const k of ["message", "name", "toJSON", "value", "get", "set", "writable", "enumerable", "configurable", "id", "input", "ns", "path", "args", "got", "rows", "reason", "query", "limit", "sent", "a", "b"]) trap(Object.prototype, k, "Object.prototype.");
  for (const k of ["message", "name"]) trap(Error.prototype, k, "Error.prototype.");
  // Reported after the result was delivered (the run completes only once this timer fired).
  const reportLeaksLater = () => setTimeout((label) => text(label + leaks), 20, "leaks: ");
`;

describe("delivery and marshalling never run an accessor the guest put on a prototype", () => {
  it("result delivery never calls a setter the guest put on Array.prototype (tool answers, errors, MCP, namespaces, the result)", async () => {
    const first = await run(
      `${TRAP}
      const got = await tools.echo({ list: [1, [2, 3]], nested: { deep: [{ x: 1 }] } });
      const list = await tools.list();
      const rows = await tools.rows();
      let failed;
      try { await tools.fails(); } catch (e) { failed = [own(e, "name"), own(e, "message")]; }
      const found = await tools.search("echo");
      const described = await tools.describe("openclaw:core:echo");
      const mcp = await MCP.github.createIssue({ title: "t", labels: ["x", "y"] });
      const ns = await Marshal.echo([1, 2], { k: [3] });
      const timerArgs = await new Promise((resolve) => setTimeout((...a) => resolve(a), 1, "a", ["b"]));
      const late = await tools.slow();
      reportLeaksLater();
      return {
        got, list, rowCount: own(own(rows, "rows"), "length"), row7: own(own(rows, "rows"), 7), failed,
        searched: Array.isArray(found) && found.length > 0, described: typeof described, mcp, ns, timerArgs, late,
      };`,
      { timeoutMs: 300 },
    );
    // The slow answer arrives while the run is suspended: wait delivers it into the restored VM.
    expect(first.model.status).toBe("waiting");
    let out = await waitFor(stack.sandbox, { scope, runId: first.model.runId! });
    for (let i = 0; out.model.status === "waiting" && i < 20; i++) out = await waitFor(stack.sandbox, { scope, runId: first.model.runId! });
    expect(out.model.status).toBe("completed");
    expect(out.model.value).toEqual({
      got: { got: { list: [1, [2, 3]], nested: { deep: [{ x: 1 }] } } },
      list: [1, [2, { three: 3 }], "four"],
      rowCount: 2000,
      row7: ROWS[7],
      failed: ["DiskError", "disk full"],
      searched: true,
      described: "object",
      mcp: { structuredContent: { sent: { title: "t", labels: ["x", "y"] } } },
      ns: { got: { a: [1, 2], b: { k: [3] } } },
      timerArgs: ["a", ["b"]],
      late: ["late", { n: 1 }],
    });
    expect(texts(out.model.output)).toEqual(["leaks: "]);
  });

  it("argument marshalling never calls an accessor the guest put on a prototype (tools.x, tools.call, MCP, namespaces)", async () => {
    const out = await run(`${TRAP}
      const input = { list: [1, , [2, 3]], when: new Date(0), map: new Map([["k", [1]]]), set: new Set([[2]]), nested: { deep: [{ x: 1 }] } };
      await tools.echo(input);
      await tools.call("openclaw:core:echo", input);
      await MCP.github.createIssue(input);
      await Marshal.echo(input, [input.list]);
      reportLeaksLater();
      return "sent";`);
    expect(out.model.status).toBe("completed");
    const sent = { list: [1, null, [2, 3]], when: "1970-01-01T00:00:00.000Z", map: [["k", [1]]], set: [[2]], nested: { deep: [{ x: 1 }] } };
    expect(out.answered.map((a) => a.input)).toEqual([sent, sent, sent, { a: sent, b: [[1, null, [2, 3]]] }]);
    expect(texts(out.model.output)).toEqual(["leaks: "]);
  });

  it("a host error reaches the guest with its own name and message, and runs no setter of the guest", async () => {
    // Too many armed timers and too many pending calls are refused by the host, inside its callback.
    const out = await run(
      `${TRAP}
      let refused = "";
      const note = (e) => { refused += own(e, "name") + ": " + own(e, "message") + "; "; };
      try { for (let i = 0; i < 200; i++) setTimeout(() => {}, 60000); } catch (e) { note(e); }
      for (let i = 0; i < 300; i++) clearTimeout(i);
      const settled = await Promise.allSettled([tools.echo({}), tools.echo({}), tools.echo({})]);
      for (const s of settled) if (s.status === "rejected") note(s.reason);
      return { refused, leaks };`,
      { maxPendingToolCalls: 2 },
    );
    expect(out.model.value).toEqual({
      refused: "RangeError: too many timers (at most 100 may be armed at once).; RangeError: too many pending tool calls (maxPendingToolCalls is 2).; ",
      leaks: "",
    });
  });
});

describe("marshalling follows JSON.stringify of the guest's value", () => {
  /** A value with own getters (counted in `reads`), a non-enumerable one, a setter-only one, and inherited ones. */
  const GETTERS = `
    let reads = 0;
    class Shape { constructor() { this.side = 2; } get area() { reads += 100; return 4; } }
    const make = () => {
      const list = [0, 1];
      Object.defineProperty(list, 1, { get() { reads++; return "one"; }, enumerable: true });
      const v = {
        plain: 1,
        get counted() { reads++; return { nested: [1, { get deep() { reads++; return "d"; } }] }; },
        get when() { reads++; return new Date(0); },
        list,
        shape: new Shape(),
      };
      Object.defineProperty(v, "hidden", { get() { reads += 100; return "hidden"; }, enumerable: false });
      Object.defineProperty(v, "writeOnly", { set(x) {}, enumerable: true });
      return v;
    };
    Object.defineProperty(Object.prototype, "inherited", { get() { reads += 100; return "inherited"; }, enumerable: true, configurable: true });
  `;
  const SENT = { plain: 1, counted: { nested: [1, { deep: "d" }] }, when: "1970-01-01T00:00:00.000Z", list: [0, "one"], shape: { side: 2 } };

  it("an argument's own getter runs exactly once, as JSON.stringify would (tools.x, tools.call, MCP, namespaces)", async () => {
    const out = await run(`${GETTERS}
      const counts = [];
      const stringified = JSON.parse(JSON.stringify(make()));
      reads = 0; await tools.echo(make()); counts.push(reads);
      reads = 0; await tools.call("openclaw:core:echo", make()); counts.push(reads);
      reads = 0; await MCP.github.createIssue(make()); counts.push(reads);
      reads = 0; await Marshal.echo(make(), make()); counts.push(reads);
      delete Object.prototype.inherited;
      return { counts, stringified };`);
    expect(out.model.status).toBe("completed");
    expect(out.model.value).toEqual({ counts: [4, 4, 4, 8], stringified: SENT });
    expect(out.answered.map((a) => a.input)).toEqual([SENT, SENT, SENT, { a: SENT, b: SENT }]);
  });

  it("the program's result and json() output follow JSON.stringify too: an own getter runs exactly once", async () => {
    const out = await run(`${GETTERS}
      json(make());
      const first = reads;
      reads = 0;
      const result = make();
      setTimeout(() => { text("result reads: " + reads); delete Object.prototype.inherited; }, 20);
      return { first, result };`);
    expect(out.model.status).toBe("completed");
    expect(out.model.value).toEqual({ first: 4, result: SENT });
    expect(out.model.output).toEqual([
      { type: "json", value: SENT },
      { type: "text", text: "result reads: 4" },
    ]);
  });

  it("toJSON is called with its key, as JSON.stringify calls it, and an own toJSON getter is read once", async () => {
    const out = await run(`
      let reads = 0;
      const keyed = { toJSON(key) { return "key=" + JSON.stringify(key); } };
      const viaGetter = { get toJSON() { reads++; return () => "from getter"; } };
      const value = { a: keyed, list: [keyed, keyed], viaGetter, map: new Map([[1, keyed]]), set: new Set([keyed]) };
      const r = await tools.echo(value);
      return { r, reads, top: (await tools.echo(keyed)).got, local: JSON.parse(JSON.stringify({ a: keyed, list: [keyed] })) };`);
    expect(out.model.status).toBe("completed");
    expect(out.model.value).toEqual({
      r: { got: { a: 'key="a"', list: ['key="0"', 'key="1"'], viaGetter: "from getter", map: [[1, 'key="1"']], set: ['key="0"'] } },
      reads: 1,
      top: 'key=""',
      local: { a: 'key="a"', list: ['key="0"'] },
    });
  });

  it("a getter that throws fails only that call, with the getter's own error", async () => {
    const out = await run(`
      let caught;
      try { await tools.echo({ ok: 1, get bad() { throw new TypeError("no reading this"); } }); } catch (e) { caught = e.name + ": " + e.message; }
      const after = await tools.echo({ ok: 2 });
      return { caught, after };`);
    expect(out.model.value).toEqual({ caught: "TypeError: no reading this", after: { got: { ok: 2 } } });
    expect(out.answered).toHaveLength(1);
  });

  it("a getter cannot make the serializer loop or grow without bound: depth and size limits hold", async () => {
    const out = await run(`
      const endless = () => ({ get next() { return endless(); } });
      const r = await tools.echo({ endless: endless() });
      let depth = 0;
      for (let v = r.got.endless; typeof v === "object"; v = v.next) depth++;
      let big;
      try { await tools.echo({ get huge() { return "x".repeat(4 * 1024 * 1024); } }); } catch (e) { big = e.name; }
      const self = { get me() { return self; } };
      const circular = await tools.echo({ self });
      return { depth, big, circular: circular.got };`);
    expect(out.model.value).toEqual({ depth: 62, big: "RangeError", circular: { self: { me: "[Circular]" } } });
  });
});

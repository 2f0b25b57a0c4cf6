/**
 * Code Mode for MCP spec section 7: the `@codemode/errors` classes and when each is
 * thrown, schema validation errors (tool and export name, JSON Pointer, expected and
 * received, an example), a hint on every error, limits as SandboxLimitError with the logs
 * kept, and cancellation reaching the upstream server. The fixture also runs over HTTP
 * with a bearer token, for AuthenticationError.
 */
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FIXTURE, standardServers, startHttpFixture, startStdioFront, type Front } from "../helpers/mcp-front.js";
import { until } from "../helpers/until.js";

let front: Front;
let httpFixture: { url: string; stop(): void };
/** Where the fixture server notes each `slow` call as it starts. */
const events = join(mkdtempSync(join(tmpdir(), "codemode-fixture-")), "events.log");
const slowStarted = () =>
  existsSync(events)
    ? readFileSync(events, "utf8")
        .split("\n")
        .filter((l) => l.startsWith("slow started")).length
    : 0;
beforeAll(async () => {
  httpFixture = await startHttpFixture("s3cret");
  front = await startStdioFront({
    ...standardServers(),
    fixture: { command: process.execPath, args: [FIXTURE, "--name", "fixture-server", "--events", events] },
    remote: { url: httpFixture.url, headers: { Authorization: "Bearer s3cret" } },
  });
});
afterAll(async () => {
  await front?.close();
  httpFixture?.stop();
});

async function stats(): Promise<{ maxConcurrent: number; calls: number; cancelled: number }> {
  const r = await front.run(`import { stats } from "@codemode/servers/fixture"; globalThis.__codemode_result__ = await stats({});`);
  return r.result as { maxConcurrent: number; calls: number; cancelled: number };
}

describe("spec 7.1: error classes", () => {
  it("R7.1-1 every error class extends CodemodeError (and Error)", async () => {
    const r = await front.run(`
      import * as E from "@codemode/errors";
      globalThis.__codemode_result__ = Object.entries(E).map(([name, C]) => [name, new C("x") instanceof E.CodemodeError, new C("x") instanceof Error]);`);
    for (const [, base, err] of r.result as Array<[string, boolean, boolean]>) expect([base, err]).toEqual([true, true]);
    expect(r.result).toHaveLength(7);
  });

  it("R7.1-2 SchemaValidationError: input that fails the tool's schema is refused before the call reaches the server", async () => {
    const before = (await stats()).calls;
    const r = await front.run(`
      import { get_item } from "@codemode/servers/fixture";
      import { SchemaValidationError } from "@codemode/errors";
      try { await get_item({ id: 7 }); } catch (e) { globalThis.__codemode_result__ = [e instanceof SchemaValidationError, e.name]; }`);
    expect(r.result).toEqual([true, "SchemaValidationError"]);
    expect(r.toolTrace).toEqual([]);
    expect((await stats()).calls).toBe(before + 1); // only the stats call itself
  });

  it("R7.1-3 ToolNotFoundError: the tool does not exist on the server", async () => {
    const r = await front.run(`
      import { getTool } from "@codemode/discovery";
      import { ToolNotFoundError } from "@codemode/errors";
      try { await getTool("fixture", "no_such_tool"); } catch (e) { globalThis.__codemode_result__ = [e instanceof ToolNotFoundError, e.serverId, e.toolName]; }`);
    expect(r.result).toEqual([true, "fixture", "no_such_tool"]);
    const imp = await front.run(`import { no_such_tool } from "@codemode/servers/fixture";`);
    expect(imp.diagnostics[0]).toMatchObject({ code: "IMPORT_FAILURE", errorClass: "ToolNotFoundError" });
  });

  it("R7.1-4 ServerNotFoundError: the server is not connected", async () => {
    const r = await front.run(`
      import { describeServer, listTools } from "@codemode/discovery";
      import { ServerNotFoundError } from "@codemode/errors";
      const out = [];
      for (const f of [() => describeServer("nope"), () => listTools("nope"), () => import("@codemode/servers/nope")]) {
        try { await f(); } catch (e) { out.push(e instanceof ServerNotFoundError); }
      }
      globalThis.__codemode_result__ = out;`);
    expect(r.result).toEqual([true, true, true]);
  });

  it("R7.1-5 ToolCallError wraps MCP isError results (and failures of the call itself)", async () => {
    const r = await front.run(`
      import * as fx from "@codemode/servers/fixture";
      import { ToolCallError } from "@codemode/errors";
      const out = [];
      try { await fx.fail({ reason: "disk full" }); } catch (e) { out.push([e instanceof ToolCallError, e.message, e.result.isError, e.toolName]); }
      try { await fx.throws(); } catch (e) { out.push([e instanceof ToolCallError, /the handler threw/.test(e.message)]); }
      globalThis.__codemode_result__ = out;`);
    expect(r.result).toEqual([
      [true, "fixture.fail failed: it failed: disk full", true, "fail"],
      [true, true],
    ]);
  });

  it("R7.1-6 AuthenticationError: the server rejected the call's credentials", async () => {
    const r = await front.run(`
      import { secret, echo_v2 } from "@codemode/servers/remote";
      import { AuthenticationError, ToolCallError } from "@codemode/errors";
      const ok = await echo_v2({ text: "authorized" });
      try { await secret(); } catch (e) { globalThis.__codemode_result__ = [ok, e instanceof AuthenticationError, e instanceof ToolCallError, e.serverId]; }`);
    expect(r.result).toEqual(["authorized", true, true, "remote"]);
  });

  it("R7.1-7 SandboxLimitError: a configured limit was exceeded", async () => {
    const r = await front.run(
      `
      import { echo_v2 } from "@codemode/servers/fixture";
      import { SandboxLimitError } from "@codemode/errors";
      await echo_v2({ text: "1" });
      try { await echo_v2({ text: "2" }); } catch (e) { globalThis.__codemode_result__ = [e instanceof SandboxLimitError, e.limit]; }`,
      { limits: { maxToolCalls: 1 } },
    );
    expect(r.result).toEqual([true, "maxToolCalls"]);
    expect(r.diagnostics).toContainEqual(expect.objectContaining({ code: "SANDBOX_LIMIT", errorClass: "SandboxLimitError" }));
  });
});

describe("spec 7.2 and 7.3: validation details and hints", () => {
  it("R7.2-1 SchemaValidationError names the canonical tool, the export, the JSON Pointer, and expected vs received", async () => {
    const r = await front.run(`
      import { get_item, complex } from "@codemode/servers/fixture";
      const out = [];
      for (const f of [() => get_item({ id: 7 }), () => get_item({}), () => complex({ mode: "fast", point: [1, "two"] })]) {
        try { await f(); } catch (e) { out.push({ toolName: e.toolName, exportName: e.exportName, path: e.path, expected: e.expected, received: e.received }); }
      }
      globalThis.__codemode_result__ = out;`);
    expect(r.result).toEqual([
      { toolName: "get-item", exportName: "get_item", path: "/id", expected: "string", received: "integer 7" },
      { toolName: "get-item", exportName: "get_item", path: "/id", expected: "a value (the property is required)", received: "nothing (it is missing)" },
      { toolName: "complex", exportName: "complex", path: "/point/1", expected: "number", received: 'string "two"' },
    ]);
  });

  it("R7.2-2 the error carries a minimal example: the schema's examples when present, else a synthesized one", async () => {
    const r = await front.run(`
      import { get_item, complex } from "@codemode/servers/fixture";
      const out = [];
      try { await complex({ mode: "nope", point: [1, 2] }); } catch (e) { out.push(e.example); }
      try { await get_item({}); } catch (e) { out.push(e.example, e.message); }
      globalThis.__codemode_result__ = out;`);
    const [fromSchema, synthesized, message] = r.result as [unknown, unknown, string];
    expect(fromSchema).toEqual({ mode: "fast", point: [1, 2] });
    expect(synthesized).toEqual({ id: "<id>" });
    expect(message).toContain("fixture.get_item");
    expect(message).toContain('"get-item"');
  });

  it("R7.3-1 every error includes a hint recommending a single corrective action", async () => {
    const r = await front.run(
      `
      import * as fx from "@codemode/servers/fixture";
      import * as E from "@codemode/errors";
      import { getTool, describeServer } from "@codemode/discovery";
      const hints = {};
      const grab = async (f) => { try { await f(); } catch (e) { hints[e.name] = e.hint; } };
      await grab(() => fx.get_item({}));
      await grab(() => getTool("fixture", "zzz"));
      await grab(() => describeServer("zzz"));
      await grab(() => fx.fail({}));
      const remote = await import("@codemode/servers/remote");
      await grab(() => remote.secret());
      await grab(async () => { for (;;) await fx.class_(); });
      hints.Base = new E.CodemodeError("made here").hint;
      globalThis.__codemode_result__ = hints;`,
      { limits: { maxToolCalls: 5 } },
    );
    const hints = r.result as Record<string, string>;
    expect(Object.keys(hints).sort()).toEqual([
      "AuthenticationError",
      "Base",
      "SandboxLimitError",
      "SchemaValidationError",
      "ServerNotFoundError",
      "ToolCallError",
      "ToolNotFoundError",
    ]);
    for (const h of Object.values(hints)) expect(typeof h === "string" && h.length > 10).toBe(true);
  });
});

describe("spec 7.4: limits, partial results and cancellation", () => {
  it("R7.4-1 a script past its limit ends with SandboxLimitError and keeps the logs captured before", async () => {
    const r = await front.run(`console.log("started"); console.warn("looping"); for (;;) {}`, { limits: { timeoutMs: 400 } });
    expect(r.result).toBeNull();
    expect(r.logs.map((l) => l.message)).toEqual(["started", "looping"]);
    expect(r.diagnostics.at(-1)).toMatchObject({ code: "SANDBOX_LIMIT", errorClass: "SandboxLimitError" });
  });

  it("R7.4-4 exceeding maxMemoryBytes is a SandboxLimitError naming the limit, even when the script catches the engine's out-of-memory error; the logs before it are kept", async () => {
    const limits = { limits: { maxMemoryBytes: 8_388_608 } };
    // Filling the heap, and one allocation larger than the limit; each caught, then "recovered".
    const fill = await front.run(
      `
      import { echo_v2 } from "@codemode/servers/fixture";
      console.log("start");
      const big = [];
      try { for (;;) big.push("x".repeat(1000) + big.length); } catch (e) {
        big.length = 0;
        console.log("caught", String(e));
        await echo_v2({ text: "after the limit" });
        globalThis.__codemode_result__ = "recovered";
      }`,
      limits,
    );
    const single = await front.run(
      `console.log("one");
let s;
try { s = "y".repeat(100_000_000); } catch { s = "small"; }
globalThis.__codemode_result__ = s;`,
      limits,
    );
    for (const r of [fill, single]) {
      expect(r.result).toBeNull();
      const d = r.diagnostics.at(-1)!;
      expect(d).toMatchObject({ severity: "error", code: "SANDBOX_LIMIT", errorClass: "SandboxLimitError" });
      expect(d.message).toContain("maxMemoryBytes (8388608 bytes)");
      expect(d.hint).toMatch(/maxMemoryBytes/);
      expect(r.toolTrace).toEqual([]); // nothing the script did after the limit left the sandbox
    }
    expect(fill.logs.map((l) => l.message)).toEqual(["start"]);
    expect(fill.diagnostics.at(-1)!.path).toMatch(/^5:\d+$/); // the line of the loop (the column: whichever allocation failed)
    expect(single.logs.map((l) => l.message)).toEqual(["one"]);
    expect(single.diagnostics.at(-1)!.path).toBe("3:15"); // the repeat call
    expect((await front.tool()).description).toContain("Exceeding timeoutMs or maxMemoryBytes ends the script, whatever it catches");
  });

  it("R7.4-5 the memory limit also holds in async code and timer callbacks, and the host keeps serving", async () => {
    const r = await front.run(
      `
      console.log("before");
      async function grow() { await null; const a = []; for (;;) a.push({ n: a.length }); }
      setTimeout(() => { try { "z".repeat(100_000_000); } catch {} }, 50);
      try { await grow(); } catch { console.log("swallowed"); }
      await new Promise((r) => setTimeout(r, 200));
      globalThis.__codemode_result__ = "finished";`,
      { limits: { maxMemoryBytes: 8_388_608 } },
    );
    expect(r.result).toBeNull();
    expect(r.logs.map((l) => l.message)).toEqual(["before"]);
    expect(r.diagnostics.at(-1)).toMatchObject({ code: "SANDBOX_LIMIT", errorClass: "SandboxLimitError" });
    expect(r.diagnostics.at(-1)!.path).toMatch(/^[34]:\d+$/); // whichever of the two ran out first
    expect((await front.run(`globalThis.__codemode_result__ = "alive";`)).result).toBe("alive");
  });

  it("R7.4-2 a script that times out during a tool call is stopped and the in-flight MCP call is cancelled upstream", async () => {
    const before = (await stats()).cancelled;
    const r = await front.run(`import { slow } from "@codemode/servers/fixture"; console.log("calling"); await slow({ ms: 5000 });`, {
      limits: { timeoutMs: 500 },
    });
    expect(r.diagnostics.at(-1)).toMatchObject({ code: "SANDBOX_LIMIT", errorClass: "SandboxLimitError" });
    expect(r.logs.map((l) => l.message)).toEqual(["calling"]);
    await until(async () => (await stats()).cancelled > before, "the upstream call to be cancelled", { everyMs: 100 });
  });

  it("R7.4-3 cancelling codemode.run terminates the sandbox and cancels its in-flight MCP calls (notifications/cancelled)", async () => {
    const before = (await stats()).cancelled;
    const started = slowStarted();
    const ctl = new AbortController();
    const pending = front.call(
      { code: `import { slow } from "@codemode/servers/fixture"; await Promise.all([slow({ ms: 8000, tag: "a" }), slow({ ms: 8000, tag: "b" })]);` },
      { signal: ctl.signal },
    );
    // Both slow calls are in flight upstream (the server notes each as it starts) when the run is cancelled.
    await until(() => slowStarted() >= started + 2, "both slow calls in flight upstream");
    ctl.abort();
    await expect(pending).rejects.toMatchObject({ name: "McpError", message: expect.stringMatching(/AbortError/) });
    await until(async () => (await stats()).cancelled >= before + 2, "both upstream calls to be cancelled", { everyMs: 100 });
    await until(() => front.stderr.some((l) => l.includes('"codemode.run finished"') && l.includes('"internal_error"')), "the run's end in the front's log");
  });
});

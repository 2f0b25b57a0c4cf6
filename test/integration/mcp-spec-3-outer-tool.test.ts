/**
 * Code Mode for MCP spec sections 1.4, 2 and 3: the single outer tool `codemode.run`, its
 * request, ES module semantics, `__codemode_result__`, requested capabilities, limits, the
 * response and its logs/diagnostics/toolTrace, fatal errors as structured responses,
 * isolation and the sandbox globals. Driven through `codemode mcp` with the MCP SDK
 * client over stdio (and one test over streamable HTTP), with real upstream servers.
 */
import { createServer } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { standardServers, startHttpFixture, startHttpFront, startStdioFront, type Front } from "../helpers/mcp-front.js";

let front: Front;
beforeAll(async () => {
  front = await startStdioFront();
});
afterAll(async () => {
  await front?.close();
});

describe("spec 1.4 and 2: one outer tool, a fresh sandbox per call", () => {
  it("R2-1 exactly one outer tool is exposed, named codemode.run", async () => {
    const { tools } = await front.client.listTools();
    expect(tools.map((t) => t.name)).toEqual(["codemode.run"]);
  });

  it("R1.4-1 each invocation starts with a fresh sandbox (no state carried over)", async () => {
    const a = await front.run(`globalThis.leftover = 41; globalThis.__codemode_result__ = typeof leftover;`);
    const b = await front.run(`globalThis.__codemode_result__ = typeof globalThis.leftover;`);
    expect(a.result).toBe("number");
    expect(b.result).toBe("undefined");
  });
});

describe("spec 3.2: request", () => {
  it("R3.2-1 code is required; a request without it gets a structured INVALID_REQUEST response, not a tool error", async () => {
    const res = await front.call({ limits: {} });
    expect(res.isError).toBeFalsy();
    const r = res.structuredContent as { result: unknown; diagnostics: Array<{ code: string }> };
    expect(r.result).toBeNull();
    expect(r.diagnostics[0]!.code).toBe("INVALID_REQUEST");
  });

  it("R3.2-2 limits and requestedCapabilities are optional", async () => {
    const r = await front.run(`globalThis.__codemode_result__ = 1;`);
    expect(r).toMatchObject({ result: 1, diagnostics: [] });
  });

  it("R3.2.1-1 code runs with ES module semantics: import/export and top-level await", async () => {
    const r = await front.run(`
      import { specVersion } from "@codemode/discovery";
      import * as everything from "@codemode/servers/everything";
      export const twice = (x) => x * 2;
      export default { unused: true };
      const echoed = await everything.echo({ message: "tla" });
      globalThis.__codemode_result__ = { specVersion, echoed, twice: twice(21) };`);
    expect(r.diagnostics).toEqual([]);
    expect(r.result).toEqual({ specVersion: "1.0.0", echoed: "Echo: tla", twice: 42 });
  });

  it("R3.2.1-2 module code is strict, top-level this is undefined and top-level return is a syntax error", async () => {
    const r = await front.run(
      `let s; try { undeclared = 1; s = "sloppy"; } catch (e) { s = e.name; } globalThis.__codemode_result__ = [s, this === undefined];`,
    );
    expect(r.result).toEqual(["ReferenceError", true]);
    const ret = await front.run(`return 1;`);
    expect(ret.diagnostics[0]!.code).toBe("SYNTAX_ERROR");
  });

  it("R3.2.1-3 the host documents its language restrictions in the tool description", async () => {
    const d = (await front.tool()).description ?? "";
    expect(d).toMatch(/ES module/);
    expect(d).toMatch(/top-level `await`/);
    expect(d).toMatch(/No eval/);
    expect(d).toContain("`Error.prepareStackTrace` cannot be set");
  });

  it("R3.2.2-1 the sandbox defines globalThis.__codemode_result__", async () => {
    const r = await front.run(`globalThis.__codemode_result__ = Object.getOwnPropertyNames(globalThis).includes("__codemode_result__");`);
    expect(r.result).toBe(true);
  });

  it("R3.2.2-2 result is the final value assigned to __codemode_result__ (after timers and calls finish), else null", async () => {
    const late = await front.run(`globalThis.__codemode_result__ = "first"; setTimeout(() => { globalThis.__codemode_result__ = "final"; }, 30);`);
    expect(late.result).toBe("final");
    const none = await front.run(`const x = 1 + 1;`);
    expect(none.result).toBeNull();
    expect(none).toHaveProperty("result", null);
  });

  it("R3.2.3-1 an unavailable requested capability gets an eager diagnostic and is not claimed", async () => {
    const r = await front.run(`globalThis.__codemode_result__ = "ran";`, { requestedCapabilities: ["github", "everything"] });
    expect(r.result).toBe("ran");
    const caps = r.diagnostics.filter((d) => d.code === "CAPABILITY_UNAVAILABLE");
    expect(caps).toHaveLength(1);
    expect(caps[0]).toMatchObject({ severity: "warning" });
    expect(caps[0]!.message).toContain("github");
  });

  it("R3.2.3-2 using an unavailable requested capability returns a structured error", async () => {
    const stat = await front.run(`import * as gh from "@codemode/servers/github";`, { requestedCapabilities: ["github"] });
    expect(stat.result).toBeNull();
    expect(stat.diagnostics.at(-1)).toMatchObject({ code: "IMPORT_FAILURE", errorClass: "ServerNotFoundError" });
    const dyn = await front.run(`try { await import("@codemode/servers/github"); } catch (e) { globalThis.__codemode_result__ = [e.name, typeof e.hint]; }`, {
      requestedCapabilities: ["github"],
    });
    expect(dyn.result).toEqual(["ServerNotFoundError", "string"]);
  });

  it("R3.2.3-3 capability identifiers are documented in the description", async () => {
    const d = (await front.tool()).description ?? "";
    expect(d).toMatch(/CAPABILITIES/);
    expect(d).toContain("- everything (@codemode/servers/everything)");
  });

  it("R3.2.4-1 timeoutMs, maxMemoryBytes, maxLogBytes and maxToolCalls are supported", async () => {
    const t = await front.run(`for (;;) {}`, { limits: { timeoutMs: 300 } });
    expect(t.diagnostics.at(-1)).toMatchObject({ code: "SANDBOX_LIMIT", errorClass: "SandboxLimitError" });
    const m = await front.run(`const a = []; for (;;) a.push("x".repeat(1000) + a.length);`, { limits: { maxMemoryBytes: 8 * 1024 * 1024 } });
    expect(m.diagnostics.at(-1)).toMatchObject({ code: "SANDBOX_LIMIT", errorClass: "SandboxLimitError" });
    const l = await front.run(`for (let i = 0; i < 100; i++) console.log("line " + i);`, { limits: { maxLogBytes: 1000 } });
    expect(l.logs.length).toBeLessThan(100);
    expect(l.logs.at(-1)).toMatchObject({ level: "warn" });
    const c = await front.run(
      `import { get_sum } from "@codemode/servers/everything"; let n = 0; try { for (;;) { await get_sum({ a: 1, b: 1 }); n++; } } catch (e) { globalThis.__codemode_result__ = [n, e.name]; }`,
      { limits: { maxToolCalls: 3 } },
    );
    expect(c.result).toEqual([3, "SandboxLimitError"]);
  });

  it("R3.2.4-1 the maxMemoryBytes asked for (or the front's --max-memory-bytes) is the limit that holds, not the default", async () => {
    // 320 strings of 64 KiB, all kept: about 20 MiB, under the 64 MiB default and five times 4 MiB.
    const code = `const a = []; for (let i = 0; i < 320; i++) a.push("z".repeat(65536) + i); globalThis.__codemode_result__ = a.length;`;
    const dflt = await front.run(code);
    expect(dflt).toMatchObject({ result: 320, diagnostics: [] });
    const limited = await front.run(code, { limits: { maxMemoryBytes: 4 * 1024 * 1024 } });
    expect(limited.result).toBeNull();
    expect(limited.diagnostics.at(-1)).toMatchObject({ code: "SANDBOX_LIMIT", errorClass: "SandboxLimitError" });
    expect(limited.diagnostics.at(-1)!.message).toContain("maxMemoryBytes (4194304 bytes)");
    const small = await startStdioFront({}, ["--max-memory-bytes", String(4 * 1024 * 1024)]);
    try {
      const hostLimited = await small.run(code);
      expect(hostLimited.result).toBeNull();
      expect(hostLimited.diagnostics.at(-1)).toMatchObject({ code: "SANDBOX_LIMIT", errorClass: "SandboxLimitError" });
      expect(hostLimited.diagnostics.at(-1)!.message).toContain("maxMemoryBytes (4194304 bytes)");
    } finally {
      await small.close();
    }
  });

  it("R3.2.4-2 unrecognized limit keys are ignored without error", async () => {
    const r = await front.run(`globalThis.__codemode_result__ = "ok";`, { limits: { maxCpuCores: 64, colour: "blue" } });
    expect(r.result).toBe("ok");
    expect(r.diagnostics).toEqual([]);
  });

  it("R3.2.4-3 supported limit keys are documented in the description", async () => {
    const d = (await front.tool()).description ?? "";
    for (const key of ["timeoutMs", "maxMemoryBytes", "maxLogBytes", "maxToolCalls"]) expect(d).toContain(key);
  });
});

describe("spec 3.3: response", () => {
  it("R3.3-1 the response has logs, result and diagnostics (and toolTrace)", async () => {
    const r = await front.run(`console.log("x"); globalThis.__codemode_result__ = { n: 1 };`);
    expect(Object.keys(r).sort()).toEqual(["diagnostics", "logs", "result", "toolTrace"]);
  });

  it("R3.3.1-1 each log entry has level, message and an integer timeMs", async () => {
    const r = await front.run(
      `const t = Date.now(); console.log("a"); await new Promise((ok) => setTimeout(ok, 20)); const waited = Date.now() - t; console.error("b"); globalThis.__codemode_result__ = waited;`,
    );
    expect(r.logs.map((l) => [l.level, l.message])).toEqual([
      ["log", "a"],
      ["error", "b"],
    ]);
    for (const l of r.logs) expect(Number.isInteger(l.timeMs) && l.timeMs >= 0).toBe(true);
    // The times follow the clock: the two logs are as far apart as the script saw itself wait
    // between them (to the millisecond each side rounds to).
    expect(r.logs[1]!.timeMs - r.logs[0]!.timeMs).toBeGreaterThanOrEqual((r.result as number) - 2);
  });

  it("R3.3.1-2 console arguments are concatenated: primitives with String(), objects as stable JSON, unserializable as a fallback", async () => {
    const r = await front.run(`
      const cyclic = { a: 1 }; cyclic.self = cyclic;
      console.log("s", 1, true, null, undefined, 10n, Symbol("q"));
      console.log({ b: 2, a: [1, { d: 4, c: 3 }] }, [3, "x"]);
      console.log(cyclic);`);
    expect(r.logs.map((l) => l.message)).toEqual(["s 1 true null undefined 10 Symbol(q)", '{"a":[1,{"c":3,"d":4}],"b":2} [3,"x"]', "[Unserializable Object]"]);
  });

  it("R3.3.2-1 toolTrace entries have serverId, canonical toolName, integer durationMs, ok and an error summary, and no inputs or outputs", async () => {
    const r = await front.run(`
      import * as fx from "@codemode/servers/fixture";
      await fx.get_item({ id: "TOP-SECRET-INPUT" });
      try { await fx.fail({ reason: "nope" }); } catch {}`);
    expect(r.toolTrace).toHaveLength(2);
    expect(r.toolTrace![0]).toMatchObject({ serverId: "fixture", toolName: "get-item", ok: true });
    expect(r.toolTrace![1]).toMatchObject({ serverId: "fixture", toolName: "fail", ok: false });
    expect(r.toolTrace![1]!.error).toMatch(/it failed/);
    for (const t of r.toolTrace!) expect(Number.isInteger(t.durationMs)).toBe(true);
    expect(JSON.stringify(r.toolTrace)).not.toContain("TOP-SECRET-INPUT");
    expect(JSON.stringify(r.toolTrace)).not.toContain("item:");
  });

  it("R3.3.3-1 diagnostics have severity, code and message, and hint, path and errorClass when known", async () => {
    const r = await front.run(`import { nope } from "@codemode/servers/fixture";`);
    const d = r.diagnostics[0]!;
    expect(["error", "warning", "info"]).toContain(d.severity);
    expect(d).toMatchObject({ code: "IMPORT_FAILURE", errorClass: "ToolNotFoundError", path: "1:10" });
    expect(typeof d.message).toBe("string");
    expect(typeof d.hint).toBe("string");
  });

  it("R3.3.3-2 an uncaught error thrown by a binding (tool call, discovery, import()) names its source location: where the script called it", async () => {
    const failed = await front.run(`
      import * as fx from "@codemode/servers/fixture";
      await fx.echo_v2({ text: "fine" });
      const r = await   fx.fail({ reason: "r" });`);
    const invalid = await front.run(`
      import { get_item } from "@codemode/servers/fixture";

        await get_item({ id: 7 });`);
    const missing = await front.run(`
      import { getTool } from "@codemode/discovery";
      const helper = () => getTool("fixture", "nope");
      await helper();`);
    const imported = await front.run(`console.log(1);\nconst m = await import("@codemode/servers/nope");`);
    expect(failed.diagnostics.at(-1)).toMatchObject({ code: "UNCAUGHT_EXCEPTION", errorClass: "ToolCallError", path: "4:28" });
    expect(failed.diagnostics.at(-1)!.message).toMatch(/fixture\.fail failed: it failed: r \(line 4, column 28\)$/);
    // A validation error keeps the JSON Pointer of the failing input as its path; the message places the call.
    expect(invalid.diagnostics.at(-1)).toMatchObject({ code: "UNCAUGHT_EXCEPTION", errorClass: "SchemaValidationError", path: "/id" });
    expect(invalid.diagnostics.at(-1)!.message).toMatch(/\(line 4, column 15\)$/);
    // The innermost frame of the script: the call inside the helper.
    expect(missing.diagnostics.at(-1)).toMatchObject({ errorClass: "ToolNotFoundError", path: "3:28" });
    expect(imported.diagnostics.at(-1)).toMatchObject({ errorClass: "ServerNotFoundError", path: "2:17" });
  });

  it("R3.3.3-3 a caught binding error carries the call site as its stack; other errors keep QuickJS's own stack format", async () => {
    const r = await front.run(`
      import { get_item } from "@codemode/servers/fixture";
      const out = [];
      try { await get_item({}); } catch (e) { out.push(e.stack); }
      try { null.x; } catch (e) { out.push(e.stack.split("\\n")[0]); }
      try { Error.prepareStackTrace = () => "mine"; } catch (e) { out.push(e.name); }
      globalThis.__codemode_result__ = out;`);
    // Stack positions count the rewritten script's first line (see docs/surfaces/mcp-run.md, its deviations).
    expect(r.result).toEqual(["    at <anonymous> (cell.js:5:19)\n", "    at <anonymous> (cell.js:6:13)", "TypeError"]);
  });

  it("R3.3.4-1 a syntax error is a structured response (not a tool error) with a diagnostic and result null", async () => {
    const res = await front.call({ code: "console.log('before');\nconst = 3;" });
    expect(res.isError).toBeFalsy();
    const r = res.structuredContent as { result: unknown; diagnostics: Array<{ code: string; path?: string }> };
    expect(r.result).toBeNull();
    expect(r.diagnostics[0]).toMatchObject({ code: "SYNTAX_ERROR", path: "2:7" });
  });

  it("R3.3.4-2 an uncaught exception keeps the logs and finished tool calls from before it", async () => {
    const r = await front.run(`
      import { echo } from "@codemode/servers/everything";
      console.log("before");
      await echo({ message: "one" });
      globalThis.__codemode_result__ = "ignored";
      throw new TypeError("boom");`);
    expect(r.result).toBeNull();
    expect(r.logs.map((l) => l.message)).toEqual(["before"]);
    expect(r.toolTrace).toHaveLength(1);
    expect(r.diagnostics.at(-1)).toMatchObject({ code: "UNCAUGHT_EXCEPTION", path: "6:17" });
    expect(r.diagnostics.at(-1)!.message).toContain("TypeError: boom");
  });

  it("R3.3.4-3 an import failure is a structured response with a diagnostic", async () => {
    const r = await front.run(`import fs from "node:fs";`);
    expect(r.result).toBeNull();
    expect(r.diagnostics[0]!.code).toBe("IMPORT_FAILURE");
    const req = await front.run(`console.log(1);\nconst fs = require("fs");`);
    expect(req.diagnostics[0]).toMatchObject({ code: "IMPORT_FAILURE", path: "2:12" });
  });
});

describe("spec 3.4 and 3.5: isolation and globals", () => {
  it("R3.4-1 no ambient network access from within the sandbox", async () => {
    const r = await front.run(
      `globalThis.__codemode_result__ = [typeof fetch, typeof XMLHttpRequest, typeof WebSocket, typeof EventSource, typeof navigator];`,
    );
    expect(r.result).toEqual(["undefined", "undefined", "undefined", "undefined", "undefined"]);
  });

  it("R3.5-1 the required globals are provided", async () => {
    const names = [
      "JSON",
      "Math",
      "Date",
      "URL",
      "URLSearchParams",
      "Promise",
      "Map",
      "Set",
      "WeakMap",
      "WeakSet",
      "Symbol",
      "Proxy",
      "Reflect",
      "RegExp",
      "Error",
      "Array",
      "Object",
      "String",
      "Number",
      "Boolean",
      "BigInt",
      "parseInt",
      "parseFloat",
      "isNaN",
      "isFinite",
      "Infinity",
      "NaN",
      "undefined",
      "TextEncoder",
      "TextDecoder",
      "ArrayBuffer",
      "DataView",
      "Uint8Array",
      "Int8Array",
      "Uint16Array",
      "Int16Array",
      "Uint32Array",
      "Int32Array",
      "Float32Array",
      "Float64Array",
      "setTimeout",
      "clearTimeout",
      "console",
    ];
    const r = await front.run(
      `globalThis.__codemode_result__ = ${JSON.stringify(names)}.filter((n) => !(n in globalThis)).concat(["log", "debug", "warn", "error"].filter((m) => typeof console[m] !== "function"));`,
    );
    expect(r.result).toEqual([]);
  });

  it("R3.5-2 fetch, setInterval, eval, Function from strings, process and require are not provided", async () => {
    const r = await front.run(`
      let fn; try { fn = new Function("return 1")(); } catch (e) { fn = e.name; }
      globalThis.__codemode_result__ = [typeof fetch, typeof setInterval, typeof eval, fn, typeof process, typeof require, typeof module, typeof Buffer];`);
    expect(r.result).toEqual(["undefined", "undefined", "undefined", "TypeError", "undefined", "undefined", "undefined", "undefined"]);
  });

  it("R3.5-3 deviations from the globals list are documented in the description", async () => {
    const d = (await front.tool()).description ?? "";
    expect(d).toMatch(/Additions \(deviations\): atob, btoa, structuredClone, queueMicrotask/);
  });
});

describe("spec 3 over streamable HTTP", () => {
  it("R3.3-2 codemode.run answers the same over streamable HTTP, with an HTTP upstream named by url and headers", async () => {
    const fixture = await startHttpFixture("t0ken");
    const http = await startHttpFront({ ...standardServers(), remote: { url: fixture.url, headers: { Authorization: "Bearer ${FIXTURE_TOKEN}" } } }, [], {
      FIXTURE_TOKEN: "t0ken",
    });
    try {
      const r = await http.run(
        `import * as remote from "@codemode/servers/remote"; globalThis.__codemode_result__ = await remote.echo_v2({ text: "over http" });`,
      );
      expect(r).toMatchObject({ result: "over http", diagnostics: [] });
    } finally {
      await http.close();
      fixture.stop();
    }
  }, 60_000);

  it("R3.2.3-4 the host tries to connect a requested server that is down before running the script", async () => {
    const port = await new Promise<number>((resolve) => {
      const s = createServer().listen(0, "127.0.0.1", () => {
        const p = (s.address() as { port: number }).port;
        s.close(() => resolve(p));
      });
    });
    const http = await startHttpFront({ late: { url: `http://127.0.0.1:${port}/mcp` } });
    const { spawn } = await import("node:child_process");
    const { FIXTURE } = await import("../helpers/mcp-front.js");
    const child = spawn(process.execPath, [FIXTURE, "--http", String(port)], { stdio: "ignore" });
    try {
      const r = await http.run(`import { echo_v2 } from "@codemode/servers/late"; globalThis.__codemode_result__ = await echo_v2({ text: "up" });`, {
        requestedCapabilities: ["late"],
      });
      expect(r).toMatchObject({ result: "up", diagnostics: [] });
    } finally {
      child.kill("SIGTERM");
      await http.close();
    }
  }, 60_000);
});

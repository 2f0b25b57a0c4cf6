/**
 * Allowed callers per tool (Tool.allowed_callers) on every surface, against real
 * processes: code mode (a direct-only tool is absent from ALL_TOOLS, search, describe,
 * `tools.<name>`, MCP and the API files, refused in the guest when called by id with no
 * ToolCallRequested, and listed beside exec and wait in DescribeSurface; a program-only
 * tool is callable from code), the direct surface, `tool_search_code`, the structured
 * Tool Search tools, and `codemode.run` (the MCP front's upstream tools carry no rule, so
 * its surface is unchanged); and the CLI's tools modules setting the rule.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SurfaceKind, ToolCallers } from "../../src/gen/codemode/common/v1/common_pb.js";
import { buildCatalog } from "../../src/mcp/catalog.js";
import { Upstream } from "../../src/mcp/upstream.js";
import { silentLogger } from "../../src/shared/logger.js";
import { toWireMcpServer, toWireTool, type GatewayMcpServer, type GatewayTool } from "../../src/shared/tool-wire.js";
import { BIN, collectStream, scope as newScope, startStack, type Stack, type ToolCallEvent } from "../helpers/harness.js";
import { FIXTURE } from "../helpers/mcp-front.js";

let stack: Stack;
beforeAll(async () => {
  stack = await startStack(["--threads", "2"]);
});
afterAll(async () => {
  expect(await stack.stop()).toBe(0);
});

const TOOLS: GatewayTool[] = [
  { name: "weather", description: "Current weather for a city", parameters: { type: "object", properties: { city: { type: "string" } } } },
  {
    name: "ask_user",
    description: "Ask the user a question and wait for the answer",
    parameters: { type: "object", properties: { question: { type: "string" } }, required: ["question"] },
    allowedCallers: "model",
  },
  { name: "sum_rows", description: "Sum the rows of a table", allowedCallers: "program" },
  { name: "forecast", description: "Weather forecast for a city", allowedCallers: "both" },
  { name: "create_issue", source: "mcp", owner: "github", description: "Create a GitHub issue" },
  { name: "delete_repo", source: "mcp", owner: "github", description: "Delete a GitHub repository", allowedCallers: "model" },
];
const SERVERS: GatewayMcpServer[] = [{ name: "github", title: "GitHub" }];
/** The same catalog without any rule: what a run's surface is without allowed callers. */
const PLAIN = TOOLS.map(({ allowedCallers: _a, ...t }) => t);

async function open(options: { tools?: GatewayTool[]; config?: Record<string, unknown>; toolSearch?: Record<string, unknown> } = {}) {
  const scope = newScope("callers");
  const res = await stack.control.openRun({
    scope,
    catalog: { case: "tools", value: { tools: (options.tools ?? TOOLS).map(toWireTool), mcpServers: SERVERS.map(toWireMcpServer) } },
    policy: { allow: [], deny: [], allowNone: false },
    config: options.config ?? {},
    ...(options.toolSearch ? { toolSearch: options.toolSearch } : {}),
  });
  return { scope, surface: res.surface! };
}

/** Runs a program, answering every nested call with `{ok: <tool name>}`; `seen` gets each ToolCallRequested. */
async function program(scope: ReturnType<typeof newScope>, code: string, seen: ToolCallEvent[] = []) {
  return collectStream(stack.sandbox.exec({ scope, execCallId: `x-${Date.now()}`, code }), (call) => {
    seen.push(call);
    void stack.sandbox.bridgeCallback({ scope, callId: call.callId, outcome: { case: "resultJson", value: JSON.stringify({ ok: call.toolName }) } });
  });
}

const RULE = /^Error: tool "ask_user" can only be called by the model directly, not from code \(its allowedCallers is "model"\)\.$/;

describe("code mode", () => {
  it("DescribeSurface lists exec, wait and the direct-only tools, whose definitions count in serializedBytes", async () => {
    const { scope, surface } = await open();
    expect(surface.kind).toBe(SurfaceKind.CODE_MODE);
    expect(surface.codeModeActive).toBe(true);
    expect(surface.tools.map((t) => [t.name, t.toolId])).toEqual([
      ["exec", ""],
      ["wait", ""],
      ["ask_user", "openclaw:core:ask_user"],
      ["delete_repo", "mcp:github:delete_repo"],
    ]);
    expect(JSON.parse(surface.tools[2]!.inputSchemaJson)).toEqual(TOOLS[1]!.parameters);
    expect(surface.tools[2]!.description).toBe("Ask the user a question and wait for the answer");
    expect(surface.serializedBytes).toBe(Buffer.byteLength(surface.toolsJson));
    // The exec description counts and teaches only what the program can reach.
    expect(surface.tools[0]!.description).toContain("hidden tool catalog (3 tools)");
    expect(surface.tools[0]!.description).not.toContain("ask_user");
    // Against the same catalog without rules: exec and wait as they were (but the count), and
    // each direct-only tool's definition exactly as the direct surface gives it, its bytes counted.
    const plain = (await open({ tools: PLAIN })).surface;
    expect(plain.tools.map((t) => t.name)).toEqual(["exec", "wait"]);
    const listed = JSON.parse(surface.toolsJson) as Array<{ name: string }>;
    const execWait = JSON.parse(plain.toolsJson.replace("(4 tools)", "(3 tools)")) as unknown[];
    expect(listed.slice(0, 2)).toEqual(execWait);
    const asDirect = (JSON.parse((await open({ config: { enabled: false } })).surface.toolsJson) as Array<{ name: string }>).filter((t) =>
      ["ask_user", "delete_repo"].includes(t.name),
    );
    expect(listed.slice(2)).toEqual(asDirect);
    expect(surface.serializedBytes).toBe(Buffer.byteLength(JSON.stringify([...execWait, ...asDirect])));
    expect(surface.serializedBytes - plain.serializedBytes).toBe(Buffer.byteLength(JSON.stringify(asDirect)) - 1);
    expect(surface.catalogSize).toBe(6);
    const again = await stack.control.describeSurface({ scope });
    expect(again.surface!.toolsJson).toBe(surface.toolsJson);
  });

  it("ALL_TOOLS, search, describe, tools.<name>, MCP and the API files leave a direct-only tool out", async () => {
    const { scope } = await open();
    const { model } = await program(
      scope,
      `const described = [];
       for (const id of ["openclaw:core:ask_user", "mcp:github:delete_repo"]) {
         try { await tools.describe(id); described.push("described"); } catch (e) { described.push(e.name + ": " + e.message); }
       }
       const files = await API.list("mcp");
       return {
         all: ALL_TOOLS.map((t) => t.id),
         search: (await tools.search("ask the user a question", { limit: 20 })).map((t) => t.id),
         listed: (await tools.search("", { limit: 20 })).map((t) => t.id),
         described,
         shortcut: typeof tools.ask_user,
         mcp: [typeof MCP.github.createIssue, typeof MCP.github.deleteRepo],
         api: (await API.read("mcp/github.d.ts")).includes("delete"),
         files: files.length,
       };`,
    );
    expect(model.status).toBe("completed");
    const v = model.value as Record<string, unknown>;
    expect(v.all).toEqual(["openclaw:core:forecast", "openclaw:core:sum_rows", "openclaw:core:weather"]);
    expect(v.search).not.toContain("openclaw:core:ask_user");
    expect(v.listed).toEqual(v.all);
    expect((v.described as string[])[0]).toMatch(RULE);
    expect((v.described as string[])[1]).toMatch(/^Error: tool "delete_repo" can only be called by the model directly/);
    expect(v.shortcut).toBe("undefined");
    expect(v.mcp).toEqual(["function", "undefined"]);
    expect(v.api).toBe(false);
    expect(v.files).toBe(2);
  });

  it("a program's call to a direct-only tool, by any path, is a catchable Error naming the rule, and reaches no gateway", async () => {
    const { scope } = await open({ config: { searchIncludesMcp: true } });
    const seen: ToolCallEvent[] = [];
    const { model } = await program(
      scope,
      `const out = [];
       for (const id of ["openclaw:core:ask_user", "mcp:github:delete_repo"]) {
         try { await tools.call(id, { question: "ok?" }); out.push("called"); } catch (e) { out.push([e instanceof Error, e.name + ": " + e.message]); }
       }
       try { await tools.describe("openclaw:core:ask_user"); } catch (e) { out.push(e.message); }
       out.push((await tools.search("delete a GitHub repository", { limit: 20 })).map((t) => t.id));
       out.push(await tools.call("openclaw:core:weather", { city: "Oslo" }));
       return out;`,
      seen,
    );
    expect(model.status).toBe("completed");
    const [byId, mcp, described, searched, weather] = model.value as [[boolean, string], [boolean, string], string, string[], unknown];
    expect(byId[0]).toBe(true);
    expect(byId[1]).toMatch(RULE);
    expect(mcp).toEqual([true, 'Error: tool "delete_repo" can only be called by the model directly, not from code (its allowedCallers is "model").']);
    expect(described).toMatch(/can only be called by the model directly/);
    expect(searched).not.toContain("mcp:github:delete_repo");
    expect(weather).toEqual({ ok: "weather" });
    expect(seen.map((c) => c.toolId)).toEqual(["openclaw:core:weather"]);
    expect(model.telemetry).toMatchObject({ callCount: 3 });
  });

  it("a program-only tool is callable from code, by id and by name", async () => {
    const { scope } = await open();
    const seen: ToolCallEvent[] = [];
    const { model } = await program(
      scope,
      `return [await tools.sum_rows({}), await tools.call("openclaw:core:sum_rows", {}), (await tools.describe("openclaw:core:sum_rows")).name];`,
      seen,
    );
    expect(model.value).toEqual([{ ok: "sum_rows" }, { ok: "sum_rows" }, "sum_rows"]);
    expect(seen.map((c) => c.toolId)).toEqual(["openclaw:core:sum_rows", "openclaw:core:sum_rows"]);
  });

  it("a direct-only tool named exec is listed beside code mode's exec under its catalog id's name", async () => {
    const { surface } = await open({ tools: [{ name: "exec", description: "Run a shell command", allowedCallers: "model" }, { name: "weather" }] });
    expect(surface.tools.map((t) => [t.name, t.toolId])).toEqual([
      ["exec", ""],
      ["wait", ""],
      ["openclaw__core__exec", "openclaw:core:exec"],
    ]);
  });
});

describe("direct surface (code mode disabled)", () => {
  it("lists every tool the model may call, and no program-only tool", async () => {
    const { surface } = await open({ config: { enabled: false } });
    expect(surface.kind).toBe(SurfaceKind.DIRECT);
    expect(surface.tools.map((t) => t.toolId)).toEqual([
      "openclaw:core:ask_user",
      "openclaw:core:forecast",
      "openclaw:core:weather",
      "mcp:github:create_issue",
      "mcp:github:delete_repo",
    ]);
    const plain = (await open({ tools: PLAIN, config: { enabled: false } })).surface;
    expect(plain.tools.map((t) => t.toolId)).toContain("openclaw:core:sum_rows");
  });
});

describe("tool_search_code", () => {
  it("search and call leave a direct-only tool out and refuse it by id; a program-only tool is callable", async () => {
    const { scope, surface } = await open({ toolSearch: { enabled: true } });
    expect(surface.kind).toBe(SurfaceKind.TOOL_SEARCH_CODE);
    expect(surface.tools.map((t) => [t.name, t.toolId])).toEqual([
      ["tool_search_code", ""],
      ["ask_user", "openclaw:core:ask_user"],
      ["delete_repo", "mcp:github:delete_repo"],
    ]);
    expect(surface.tools[0]!.description).toContain("hidden tools (4 tools)");
    const seen: ToolCallEvent[] = [];
    const { model } = await program(
      scope,
      `const out = [(await openclaw.tools.search("", { limit: 20 })).map((t) => t.id)];
       for (const id of ["openclaw:core:ask_user", "mcp:github:delete_repo"]) {
         try { await openclaw.tools.call(id, {}); out.push("called"); } catch (e) { out.push(e.name + ": " + e.message); }
       }
       try { await openclaw.tools.describe("openclaw:core:ask_user"); } catch (e) { out.push(e.message); }
       out.push(await openclaw.tools.call("openclaw:core:sum_rows", {}));
       return out;`,
      seen,
    );
    expect(model.status).toBe("completed");
    const [listed, byId, mcp, described, sum] = model.value as [string[], string, string, string, unknown];
    expect(listed).toEqual(["openclaw:core:forecast", "openclaw:core:sum_rows", "openclaw:core:weather", "mcp:github:create_issue"]);
    expect(byId).toMatch(RULE);
    expect(mcp).toMatch(/^Error: tool "delete_repo" can only be called by the model directly/);
    expect(described).toMatch(/can only be called by the model directly/);
    expect(sum).toEqual({ ok: "sum_rows" });
    expect(seen.map((c) => c.toolId)).toEqual(["openclaw:core:sum_rows"]);
  });
});

describe("tool_search / tool_describe / tool_call (the structured tools)", () => {
  it("find, describe and call direct-only tools, and treat a program-only tool as outside the run's view", async () => {
    const { scope, surface } = await open({ toolSearch: { enabled: true, mode: "tools" } });
    expect(surface.kind).toBe(SurfaceKind.TOOL_SEARCH_TOOLS);
    expect(surface.tools.map((t) => t.name)).toEqual(["tool_search", "tool_describe", "tool_call"]);
    expect(surface.tools[0]!.description).toContain("(5 tools)");
    const listed = await stack.sandbox.toolSearch({ scope, callId: "s1", query: "", limit: 20 });
    expect(listed.tools.map((t) => t.id)).toEqual([
      "openclaw:core:ask_user",
      "openclaw:core:forecast",
      "openclaw:core:weather",
      "mcp:github:create_issue",
      "mcp:github:delete_repo",
    ]);
    const ranked = await stack.sandbox.toolSearch({ scope, callId: "s2", query: "sum the rows of a table", limit: 20 });
    expect(ranked.tools.map((t) => t.id)).not.toContain("openclaw:core:sum_rows");
    const described = await stack.sandbox.toolDescribe({ scope, callId: "d1", id: "openclaw:core:sum_rows" });
    expect(described.error).toMatchObject({ name: "ToolNotFound" });
    expect(described.error!.message).toBe('unknown tool id "openclaw:core:sum_rows". Search the catalog (tool_search) to find tool ids.');
    expect((await stack.sandbox.toolDescribe({ scope, callId: "d3", id: "openclaw:core:ask_user" })).tool?.name).toBe("ask_user");
    const seen: ToolCallEvent[] = [];
    const refused = await collectStream(stack.sandbox.toolCall({ scope, callId: "c1", id: "openclaw:core:sum_rows", inputJson: "{}" }), (c) => seen.push(c));
    expect(refused.model).toMatchObject({ status: "failed" });
    expect(refused.model.error).toMatch(/^ToolNotFound: unknown tool id "openclaw:core:sum_rows"/);
    expect(seen).toEqual([]);
    const called = await collectStream(stack.sandbox.toolCall({ scope, callId: "c2", id: "openclaw:core:ask_user", inputJson: '{"question":"ok?"}' }), (c) => {
      seen.push(c);
      void stack.sandbox.bridgeCallback({ scope, callId: c.callId, outcome: { case: "resultJson", value: '"yes"' } });
    });
    expect(called.model).toEqual({ status: "completed", value: "yes" });
    expect(seen.map((c) => c.toolId)).toEqual(["openclaw:core:ask_user"]);
  });
});

describe("codemode.run", () => {
  it("the MCP front's upstream tools carry no rule, so codemode.run's surface is what it was", async () => {
    const upstream = new Upstream(
      "fixture",
      { kind: "stdio", command: process.execPath, args: [FIXTURE, "--name", "fixture-server"], env: {} },
      silentLogger(),
      () => undefined,
      { name: "allowed-callers-test", version: "1" },
    );
    await upstream.start();
    try {
      const catalog = buildCatalog([{ catalogName: "fixture", upstream }], silentLogger());
      expect(catalog.tools.length).toBeGreaterThan(10);
      expect(catalog.tools.every((t) => (t.allowedCallers ?? ToolCallers.UNSPECIFIED) === ToolCallers.UNSPECIFIED)).toBe(true);
      const openMcpRun = async (tools: typeof catalog.tools) => {
        const scope = newScope("callers-mcprun");
        const res = await stack.control.openRun({
          scope,
          catalog: { case: "tools", value: { tools, mcpServers: catalog.mcpServers } },
          mcpRun: { enabled: true },
        });
        return { scope, catalogId: res.catalogId, surface: res.surface! };
      };
      const front = await openMcpRun(catalog.tools);
      // The same tools marked "both" explicitly are the same catalog and the same surface.
      const both = await openMcpRun(catalog.tools.map((t) => ({ ...t, allowedCallers: ToolCallers.MODEL_AND_PROGRAM })));
      expect(front.surface.kind).toBe(SurfaceKind.MCP_RUN);
      expect(front.surface.tools.map((t) => t.name)).toEqual(["codemode.run"]);
      expect(both.catalogId).toBe(front.catalogId);
      expect(both.surface.toolsJson).toBe(front.surface.toolsJson);
      const { result } = await collectStream(
        stack.sandbox.exec({
          scope: front.scope,
          execCallId: "r1",
          inputJson: JSON.stringify({
            code: `import { listServers, listTools } from "@codemode/discovery"; globalThis.__codemode_result__ = (await listTools((await listServers())[0].serverId)).length;`,
          }),
        }),
      );
      expect(JSON.parse(result.modelJson)).toMatchObject({ result: catalog.tools.length, diagnostics: [] });
    } finally {
      await upstream.close();
    }
  });

  it("a gateway's direct-only MCP tool is left out of codemode.run's declarations, as on every program surface", async () => {
    const tools = [
      { name: "lookup", source: "mcp" as const, owner: "docs", description: "Look a word up." },
      { name: "purge", source: "mcp" as const, owner: "docs", description: "Purge the docs.", allowedCallers: "model" as const },
    ];
    const scope = newScope("callers-mcprun");
    const res = await stack.control.openRun({
      scope,
      catalog: { case: "tools", value: { tools: tools.map(toWireTool), mcpServers: [toWireMcpServer({ name: "docs" })] } },
      mcpRun: { enabled: true },
    });
    expect(res.surface!.tools.map((t) => t.name)).toEqual(["codemode.run"]);
    expect(res.surface!.tools[0]!.description).toContain("lookup");
    expect(res.surface!.tools[0]!.description).not.toContain("purge");
    const { result } = await collectStream(
      stack.sandbox.exec({
        scope,
        execCallId: "r2",
        inputJson: JSON.stringify({
          code: `import { searchTools } from "@codemode/discovery"; globalThis.__codemode_result__ = (await searchTools("")).results.map((r) => r.toolName);`,
        }),
      }),
    );
    expect(JSON.parse(result.modelJson)).toMatchObject({ result: ["lookup"] });
  });
});

describe("the CLI's tools module", () => {
  const dir = mkdtempSync(join(tmpdir(), "codemode-callers-"));
  const module = (allowed: string) => {
    const file = join(dir, `tools-${allowed}.mjs`);
    writeFileSync(
      file,
      `export default [
        { name: "ask_user", description: "Ask the user", allowedCallers: ${JSON.stringify(allowed)}, handler: () => "yes" },
        { name: "sum_rows", description: "Sum rows", allowedCallers: "program", handler: () => 6 },
        { name: "weather", description: "Weather", allowedCallers: "both", handler: () => "sunny" },
      ];`,
    );
    return file;
  };
  const run = (cmd: string, args: string[]) => spawnSync(process.execPath, [BIN, cmd, ...args], { encoding: "utf8", timeout: 30_000 });

  it("sets allowedCallers per tool: codemode surface and codemode exec apply it", () => {
    const file = module("model");
    const code = JSON.parse(run("surface", ["--mode", "code", "--tools", file]).stdout) as { tools: Array<{ name: string }> };
    expect(code.tools.map((t) => t.name)).toEqual(["exec", "wait", "ask_user"]);
    const direct = JSON.parse(run("surface", ["--mode", "direct", "--tools", file]).stdout) as { tools: Array<{ name: string }> };
    expect(direct.tools.map((t) => t.name)).toEqual(["ask_user", "weather"]);
    const r = run("exec", [
      "--sandbox",
      stack.sandboxAddress,
      "--orchestrator",
      stack.orchestratorAddress,
      "--tools",
      file,
      "--code",
      `let refused; try { await tools.call("openclaw:core:ask_user", {}); } catch (e) { refused = e.message; } return [ALL_TOOLS.map((t) => t.name), await tools.sum_rows({}), refused];`,
    ]);
    expect(r.status, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout.trim())).toMatchObject({
      status: "completed",
      value: [["sum_rows", "weather"], 6, expect.stringMatching(/allowedCallers is "model"/)],
    });
  });

  it("refuses a value other than model, program or both, naming the tool and the field", () => {
    const r = run("surface", ["--mode", "code", "--tools", module("everyone")]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toMatch(/tools\[0\]\.allowedCallers/);
  });
});

/**
 * The Tool Search surfaces (seed: openclaw-tool-search.md) against real processes:
 * selection at OpenRun and the model-visible tools, `tool_search_code` (search →
 * describe → call through the gateway, MCP entries searchable and callable by id, the
 * reduced guest API, never suspending), the structured `tool_search` / `tool_describe` /
 * `tool_call`, failures (unknown tool, a blocked call), policy (a denied tool is returned
 * by no surface), telemetry and trajectory, config clamps, code mode's
 * `searchIncludesMcp`, and the CLI (`codemode surface`, `codemode exec --mode`).
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Refusal, ResultStatus, SurfaceKind, ToolSource } from "../../src/gen/codemode/common/v1/common_pb.js";
import { toWireMcpServer, toWireTool, type GatewayMcpServer, type GatewayTool } from "../../src/shared/tool-wire.js";
import { BIN, collectStream, scope as newScope, startStack, type Stack, type ToolCallEvent } from "../helpers/harness.js";

let stack: Stack;
beforeAll(async () => {
  stack = await startStack(["--threads", "2"]);
});
afterAll(async () => {
  expect(await stack.stop()).toBe(0);
});

type Tool = GatewayTool & { handler?: (input: unknown) => unknown };
const TOOLS: Tool[] = [
  {
    name: "message",
    description: "Send a chat message to a channel. Posts as the agent.",
    parameters: { type: "object", properties: { channel: { type: "string" }, text: { type: "string" } }, required: ["channel", "text"] },
    handler: (i) => ({ sent: i }),
  },
  {
    name: "web_search",
    description: "Search the web for pages",
    parameters: { type: "object", properties: { query: { type: "string" } } },
    handler: (i) => ({ hits: [(i as { query: string }).query] }),
  },
  {
    name: "calendar_create",
    owner: "calendar",
    origin: "external_plugin",
    description: "Create a calendar event",
    parameters: { type: "object", properties: { title: { type: "string" } } },
    handler: (i) => ({ created: i }),
  },
  { name: "select_file", source: "client", owner: "app", description: "Ask the user to pick a file", handler: () => ({ path: "/tmp/a.txt" }) },
  {
    name: "create_issue",
    source: "mcp",
    owner: "github",
    description: "Create a new issue in a GitHub repository",
    parameters: { type: "object", properties: { repo: { type: "string" }, title: { type: "string" } }, required: ["repo", "title"] },
    handler: (i) => ({ number: 7, ...(i as object) }),
  },
  { name: "list_issues", source: "mcp", owner: "github", description: "List issues of a GitHub repository", handler: () => [] },
  { name: "delete_repository", source: "mcp", owner: "github", description: "Delete a GitHub repository for good", handler: () => ({ deleted: true }) },
  { name: "secret_rotate", description: "Rotate production secrets", handler: () => ({ rotated: true }) },
  {
    name: "guarded_deploy",
    description: "Deploy to production (needs approval)",
    handler: () => {
      const e = new Error("approval denied by the operator");
      e.name = "PolicyDenied";
      throw e;
    },
  },
];
const SERVERS: GatewayMcpServer[] = [{ name: "github", title: "GitHub", description: "Issues, pull requests and repositories on GitHub", aliases: ["gh"] }];
const DENY = ["mcp:github:delete_repository", "secret_*"];
const DENIED_IDS = ["mcp:github:delete_repository", "openclaw:core:secret_rotate"];

async function open(toolSearch: Record<string, unknown> | undefined, config: Record<string, unknown> = {}, deny = DENY) {
  const scope = newScope("ts");
  const res = await stack.control.openRun({
    scope,
    catalog: { case: "tools", value: { tools: TOOLS.map(toWireTool), mcpServers: SERVERS.map(toWireMcpServer) } },
    policy: { allow: [], deny, allowNone: false },
    config,
    ...(toolSearch ? { toolSearch } : {}),
  });
  return { scope, surface: res.surface! };
}

/** The gateway: answers each nested call with the tool's handler through BridgeCallback. */
function answering(scope: ReturnType<typeof newScope>, seen: ToolCallEvent[] = []) {
  return (call: ToolCallEvent) => {
    seen.push(call);
    const tool = TOOLS.find((t) => t.name === call.toolName);
    let outcome: { case: "resultJson"; value: string } | { case: "error"; value: { name: string; message: string } };
    try {
      outcome = { case: "resultJson", value: JSON.stringify(tool?.handler?.(JSON.parse(call.inputJson)) ?? null) };
    } catch (err) {
      outcome = { case: "error", value: { name: (err as Error).name, message: (err as Error).message } };
    }
    void stack.sandbox.bridgeCallback({ scope, callId: call.callId, outcome });
  };
}

async function program(scope: ReturnType<typeof newScope>, code: string, seen: ToolCallEvent[] = []) {
  return collectStream(stack.sandbox.exec({ scope, execCallId: `x-${Date.now()}`, code }), answering(scope, seen));
}

describe("tool_search_code (mode code)", () => {
  it("is the only model-visible tool, with an exact input schema", async () => {
    const { surface } = await open({ enabled: true });
    expect(surface.kind).toBe(SurfaceKind.TOOL_SEARCH_CODE);
    expect(surface.codeModeActive).toBe(false);
    expect(surface.tools.map((t) => t.name)).toEqual(["tool_search_code"]);
    expect(JSON.parse(surface.tools[0]!.inputSchemaJson)).toEqual({
      type: "object",
      properties: { code: { type: "string", description: "The program: an async function body." } },
      required: ["code"],
      additionalProperties: false,
    });
    expect(surface.tools[0]!.description).toContain("openclaw.tools.search(query, { limit })");
    expect(surface.serializedBytes).toBe(Buffer.byteLength(surface.toolsJson));
    expect(surface.catalogSize).toBe(7);
    expect(surface.sources).toMatchObject({ openclaw: 4, mcp: 2, client: 1 });
  });

  it("searches, describes and calls an MCP tool by id through the gateway (the seed's example)", async () => {
    const { scope } = await open({ enabled: true });
    const seen: ToolCallEvent[] = [];
    const { model } = await program(
      scope,
      `const hits = await openclaw.tools.search("create a GitHub issue");
       const tool = await openclaw.tools.describe(hits[0].id);
       const made = await openclaw.tools.call(tool.id, { repo: "openclaw/openclaw", title: "Crash on startup" });
       console.log("made", made.number);
       return { first: hits[0], required: tool.parameters.required, made };`,
      seen,
    );
    expect(model.status).toBe("completed");
    const v = model.value as { first: Record<string, unknown>; required: string[]; made: Record<string, unknown> };
    expect(v.first).toEqual({
      id: "mcp:github:create_issue",
      name: "create_issue",
      description: "Create a new issue in a GitHub repository",
      source: "mcp",
      sourceName: "github",
    });
    expect(v.required).toEqual(["repo", "title"]);
    expect(v.made).toEqual({ number: 7, repo: "openclaw/openclaw", title: "Crash on startup" });
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ toolId: "mcp:github:create_issue", toolName: "create_issue", source: ToolSource.MCP, sourceName: "github" });
    expect(model.output).toEqual([{ type: "text", text: "made 7" }]);
    expect(model.telemetry).toMatchObject({ searchCount: 1, describeCount: 1, callCount: 1, modelVisibleTools: ["tool_search_code"] });
  });

  it("gives the program only openclaw.tools and console.log/warn/error", async () => {
    const { scope } = await open({ enabled: true });
    const { model } = await program(
      scope,
      `console.warn("w"); console.error("e");
       return ["tools", "ALL_TOOLS", "MCP", "API", "namespaces", "text", "json", "yield_control", "setTimeout", "require"].map((n) => typeof globalThis[n])
         .concat([typeof console.info, typeof openclaw.tools.call, Object.keys(openclaw.tools).join(",")]);`,
    );
    expect(model.value).toEqual([...Array(10).fill("undefined"), "undefined", "function", "search,describe,call"]);
    expect(model.output).toEqual([
      { type: "text", text: "[warn] w" },
      { type: "text", text: "[error] e" },
    ]);
  });

  it("never suspends: a call pending at codeTimeoutMs fails with timeout", async () => {
    const { scope } = await open({ enabled: true, codeTimeoutMs: 300 });
    const { model, result } = await collectStream(
      stack.sandbox.exec({ scope, code: `return await openclaw.tools.call("openclaw:core:web_search", { query: "x" });` }),
    );
    expect(model).toMatchObject({ status: "failed", code: "timeout" });
    expect(model.error).toMatch(/timed out after 300 ms with 1 tool call still pending/);
    expect(model.runId).toBeUndefined();
    expect(result.status).toBe(ResultStatus.FAILED);
  });

  it("an unknown id and a blocked call are catchable errors that report the block", async () => {
    const { scope } = await open({ enabled: true });
    const { model } = await program(
      scope,
      `const out = [];
       for (const id of ["openclaw:core:mesage", "openclaw:core:guarded_deploy"]) {
         try { await openclaw.tools.call(id, {}); } catch (e) { out.push(e.name + ": " + e.message); }
       }
       return out;`,
    );
    const [unknown, blocked] = model.value as string[];
    expect(unknown).toMatch(/^ToolNotFound: unknown tool id "openclaw:core:mesage"\. Did you mean: openclaw:core:message/);
    expect(blocked).toBe("PolicyDenied: approval denied by the operator");
  });

  it("refuses TypeScript (the seed's bridge runs JavaScript) and module access, naming this surface", async () => {
    const { scope } = await open({ enabled: true });
    const { model } = await collectStream(stack.sandbox.exec({ scope, code: "return 1", language: "typescript" }));
    expect(model).toMatchObject({ status: "failed", code: "invalid_input" });
    expect(model.error).toMatch(/^tool_search_code language "typescript" is disabled/);
    const mod = await collectStream(stack.sandbox.exec({ scope, code: 'const fs = require("fs"); return 1' }));
    expect(mod.model).toMatchObject({ status: "failed", code: "invalid_input" });
    expect(mod.model.error).toMatch(
      /^tool_search_code rejects module access: `require.* is not available in tool_search_code .* Use openclaw\.tools\.search\/openclaw\.tools\.call instead\.$/,
    );
  });
});

describe("tool_search / tool_describe / tool_call (mode tools)", () => {
  it("are the model-visible tools, with exact input schemas; Exec is refused", async () => {
    const { scope, surface } = await open({ enabled: true, mode: "tools" });
    expect(surface.kind).toBe(SurfaceKind.TOOL_SEARCH_TOOLS);
    expect(surface.tools.map((t) => t.name)).toEqual(["tool_search", "tool_describe", "tool_call"]);
    expect(surface.tools.map((t) => JSON.parse(t.inputSchemaJson))).toEqual([
      {
        type: "object",
        properties: { query: { type: "string", description: 'The task, e.g. "create a GitHub issue".' }, limit: { type: "integer", minimum: 1, maximum: 20 } },
        required: ["query"],
        additionalProperties: false,
      },
      { type: "object", properties: { id: { type: "string" } }, required: ["id"], additionalProperties: false },
      {
        type: "object",
        properties: { id: { type: "string" }, args: { type: "object", description: "The tool's input." } },
        required: ["id"],
        additionalProperties: false,
      },
    ]);
    const { result } = await collectStream(stack.sandbox.exec({ scope, code: "return 1" }));
    expect(result.refusal).toBe(Refusal.CODE_MODE_INACTIVE);
  });

  it("search → describe → call through the gateway, counted and recorded", async () => {
    const { scope } = await open({ enabled: true, mode: "tools" });
    const found = await stack.sandbox.toolSearch({ scope, callId: "m1", query: "gh issue create", limit: 3 });
    expect(found.tools[0]).toMatchObject({ id: "mcp:github:create_issue", source: ToolSource.MCP, sourceName: "github" });
    expect(found.tools).toHaveLength(3);
    expect(JSON.parse(found.modelJson)[0]).toEqual({
      id: "mcp:github:create_issue",
      name: "create_issue",
      description: "Create a new issue in a GitHub repository",
      source: "mcp",
      sourceName: "github",
    });
    const described = await stack.sandbox.toolDescribe({ scope, callId: "m2", id: "openclaw:core:message" });
    expect(described.tool).toMatchObject({ id: "openclaw:core:message", description: "Send a chat message to a channel." });
    expect(described.fullDescription).toBe("Send a chat message to a channel. Posts as the agent.");
    expect(JSON.parse(described.parametersJson)).toMatchObject({ required: ["channel", "text"] });
    expect(JSON.parse(described.modelJson)).toMatchObject({ id: "openclaw:core:message", parameters: { required: ["channel", "text"] } });
    const seen: ToolCallEvent[] = [];
    const called = await collectStream(
      stack.sandbox.toolCall({ scope, callId: "m3", id: "mcp:github:create_issue", inputJson: '{"repo":"a/b","title":"t"}' }),
      answering(scope, seen),
    );
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ toolId: "mcp:github:create_issue", source: ToolSource.MCP, parentCallId: "m3", inputJson: '{"repo":"a/b","title":"t"}' });
    expect(called.result.status).toBe(ResultStatus.COMPLETED);
    expect(JSON.parse(called.result.modelJson)).toEqual({ status: "completed", value: { number: 7, repo: "a/b", title: "t" } });
    expect(called.result.telemetry).toMatchObject({
      searchCount: 1,
      describeCount: 1,
      callCount: 1,
      modelVisibleTools: ["tool_search", "tool_describe", "tool_call"],
    });
    const { steps } = await stack.control.getTrajectory({ scope });
    expect(steps.map((s) => [s.kind, s.callId, s.status])).toEqual([
      ["tool_search", "m1", "completed"],
      ["tool_describe", "m2", "completed"],
      ["tool_call", "m3", "completed"],
    ]);
    expect(steps[2]!.nestedCalls[0]).toMatchObject({
      toolId: "mcp:github:create_issue",
      outcome: "ok",
      source: ToolSource.MCP,
      sourceName: "github",
      parentCallId: "m3",
    });
  });

  it("an unknown tool fails with suggestions and no nested call; a blocked call reports the block", async () => {
    const { scope } = await open({ enabled: true, mode: "tools" });
    const d = await stack.sandbox.toolDescribe({ scope, callId: "d", id: "github:create_isue" });
    expect(d.error?.name).toBe("ToolNotFound");
    expect(d.error?.message).toMatch(/Did you mean: mcp:github:create_issue/);
    expect(JSON.parse(d.modelJson).error).toMatch(/^ToolNotFound: unknown tool id/);
    const seen: ToolCallEvent[] = [];
    const unknown = await collectStream(stack.sandbox.toolCall({ scope, callId: "c1", id: "nope", inputJson: "{}" }), answering(scope, seen));
    expect(unknown.model).toMatchObject({ status: "failed" });
    expect(unknown.model.error).toMatch(/^ToolNotFound: unknown tool id "nope"/);
    const blocked = await collectStream(
      stack.sandbox.toolCall({ scope, callId: "c2", id: "openclaw:core:guarded_deploy", inputJson: "" }),
      answering(scope, seen),
    );
    expect(blocked.model).toEqual({ status: "failed", error: "PolicyDenied: approval denied by the operator" });
    expect(seen.map((c) => c.toolId)).toEqual(["openclaw:core:guarded_deploy"]);
  });

  it("are refused on a code-mode run, and malformed args are INVALID_ARGUMENT", async () => {
    const code = await open(undefined);
    await expect(stack.sandbox.toolSearch({ scope: code.scope, query: "x" })).rejects.toMatchObject({ code: "failed_precondition" });
    const tools = await open({ enabled: true, mode: "tools" });
    await expect(collectStream(stack.sandbox.toolCall({ scope: tools.scope, id: "openclaw:core:message", inputJson: "{nope" }))).rejects.toMatchObject({
      code: "invalid_argument",
    });
  });
});

describe("policy: denied tools are returned by no surface", () => {
  it("direct, tool_search, tool_search_code and code mode (with and without searchIncludesMcp)", async () => {
    const direct = await open(undefined, { enabled: false });
    expect(direct.surface.kind).toBe(SurfaceKind.DIRECT);
    const names = direct.surface.tools.map((t) => t.name);
    expect(names).toContain("create_issue");
    for (const denied of ["delete_repository", "secret_rotate"]) expect(names).not.toContain(denied);

    const tools = await open({ enabled: true, mode: "tools" });
    const foundByTools: string[] = [];
    for (const q of ["delete repository", "rotate production secrets", ""]) {
      const r = await stack.sandbox.toolSearch({ scope: tools.scope, query: q, limit: 50 });
      for (const id of DENIED_IDS) expect(r.tools.map((t) => t.id)).not.toContain(id);
      foundByTools.push(...r.tools.map((t) => t.id));
    }
    // The searches do find the tools they are near (so their missing the denied ones means something).
    expect(foundByTools).toEqual(expect.arrayContaining(["mcp:github:create_issue", "openclaw:core:guarded_deploy"]));
    for (const id of DENIED_IDS) {
      expect((await stack.sandbox.toolDescribe({ scope: tools.scope, id })).error?.name).toBe("ToolNotFound");
      const seen: ToolCallEvent[] = [];
      const called = await collectStream(stack.sandbox.toolCall({ scope: tools.scope, id, inputJson: "{}" }), answering(tools.scope, seen));
      expect(called.model.error).toMatch(/^ToolNotFound/);
      expect(seen).toEqual([]);
    }

    const probe = `const out = [];
      for (const q of ["delete repository", "rotate production secrets", ""]) out.push(...(await tools.search(q, { limit: 50 })).map((e) => e.id));
      return out;`;
    const code = await open({ enabled: true });
    const seen: ToolCallEvent[] = [];
    const tsc = await program(
      code.scope,
      `const out = [];
       for (const q of ["delete repository", "rotate production secrets", ""]) out.push(...(await openclaw.tools.search(q, { limit: 50 })).map((e) => e.id));
       for (const id of ${JSON.stringify(DENIED_IDS)}) {
         try { await openclaw.tools.describe(id); out.push(id); } catch (e) {}
         try { await openclaw.tools.call(id, {}); out.push(id); } catch (e) {}
       }
       return out;`,
      seen,
    );
    expect(tsc.model.status).toBe("completed");
    expect(tsc.model.value).toEqual(expect.arrayContaining(["mcp:github:create_issue", "openclaw:core:guarded_deploy"]));
    for (const id of DENIED_IDS) expect(tsc.model.value).not.toContain(id);
    expect(seen).toEqual([]);
    for (const config of [{}, { searchIncludesMcp: true }]) {
      const cm = await open(undefined, config);
      const r = await program(cm.scope, probe);
      expect(r.model.status).toBe("completed");
      expect(r.model.value).toContain("openclaw:core:guarded_deploy");
      for (const id of DENIED_IDS) expect(r.model.value).not.toContain(id);
    }
  });
});

describe("config", () => {
  it("clamps the Tool Search keys and refuses a bad mode", async () => {
    const { surface } = await open({ enabled: true, mode: "tools", maxSearchLimit: 500, searchDefaultLimit: 200, codeTimeoutMs: 5 });
    expect(surface.tools[0]!.description).toMatch(/\(default 50, at most 50\)/);
    expect(JSON.parse(surface.tools[0]!.inputSchemaJson).properties.limit).toEqual({ type: "integer", minimum: 1, maximum: 50 });
    const code = await open({ enabled: true, codeTimeoutMs: 999_999, maxSearchLimit: 0 });
    expect(code.surface.tools[0]!.description).toMatch(/\(default 1, at most 1\)[\s\S]*Limit: 60000 ms/);
    // The clamped limit is the one searches get, not only the one the description names.
    const issues = `return (await openclaw.tools.search("github issues", { limit: 50 })).map((e) => e.id);`;
    const unclamped = await program((await open({ enabled: true })).scope, issues);
    expect((unclamped.model.value as string[]).length).toBeGreaterThan(1);
    const clamped = await program(code.scope, issues);
    expect(clamped.model).toMatchObject({ status: "completed", value: [(unclamped.model.value as string[])[0]] });
    await expect(open({ enabled: true, mode: "both" })).rejects.toMatchObject({
      code: "invalid_argument",
      message: expect.stringMatching(/toolSearch\.mode must be "code" or "tools"/),
    });
  });

  it("maxSearchLimit caps tool_search and openclaw.tools.search whatever limit is asked for", async () => {
    // Twelve tools that all match the query, so only the cap can hold a search to two.
    const reports = Array.from({ length: 12 }, (_, i) => ({ name: `report_${i}`, description: `Build the quarterly report number ${i}` }));
    const openReports = async (toolSearch: Record<string, unknown>) => {
      const scope = newScope("ts-cap");
      await stack.control.openRun({ scope, catalog: { case: "tools", value: { tools: reports.map(toWireTool) } }, toolSearch });
      return scope;
    };
    const code = `return (await openclaw.tools.search("quarterly report", { limit: 50 })).map((e) => e.id);`;
    for (const [maxSearchLimit, expected] of [
      [50, 12],
      [2, 2],
    ] as const) {
      const tools = await openReports({ enabled: true, mode: "tools", maxSearchLimit });
      const found = await stack.sandbox.toolSearch({ scope: tools, callId: `cap-${maxSearchLimit}`, query: "quarterly report", limit: 50 });
      expect(found.tools).toHaveLength(expected);
      expect(JSON.parse(found.modelJson)).toHaveLength(expected);
      const inCode = await program(await openReports({ enabled: true, maxSearchLimit }), code);
      expect(inCode.model.status).toBe("completed");
      expect(inCode.model.value).toHaveLength(expected);
    }
  });

  it("code mode enabled explicitly supersedes Tool Search (the seed's rule); disabled code mode does not block it", async () => {
    expect((await open({ enabled: true }, { enabled: true })).surface.kind).toBe(SurfaceKind.CODE_MODE);
    expect((await open({ enabled: true }, { enabled: false })).surface.kind).toBe(SurfaceKind.TOOL_SEARCH_CODE);
    expect((await open({ enabled: false })).surface.kind).toBe(SurfaceKind.CODE_MODE);
  });

  it("searchIncludesMcp: code mode's tools.search also lists MCP entries with their MCP.<server>.<fn> path", async () => {
    const off = await open(undefined);
    const r0 = await program(off.scope, `return (await tools.search("create a GitHub issue")).map((e) => e.id);`);
    expect(r0.model.value).not.toContain("mcp:github:create_issue");
    const on = await open(undefined, { searchIncludesMcp: true });
    const r1 = await program(
      on.scope,
      `const [hit] = await tools.search("create a GitHub issue", { limit: 1 });
       const made = await MCP.github.createIssue({ repo: "a/b", title: "t" });
       let refused = ""; try { await tools.call(hit.id, {}); } catch (e) { refused = e.message; }
       return { hit, made, refused };`,
    );
    expect(r1.model.value).toMatchObject({
      hit: { id: "mcp:github:create_issue", source: "mcp", sourceName: "github", call: "MCP.github.createIssue" },
      made: { number: 7 },
      refused: expect.stringContaining("Call it as MCP.github.createIssue({ ... })"),
    });
  });
});

describe("CLI", () => {
  const tools = fileURLToPath(new URL("../../examples/tools.mjs", import.meta.url));
  it("codemode surface prints the model-visible tools and their bytes for each mode", () => {
    const sizes: Record<string, number> = {};
    for (const mode of ["code", "tool_search_code", "tool_search", "direct"]) {
      const r = spawnSync(process.execPath, [BIN, "surface", "--mode", mode, "--tools", tools, "--orchestrator", stack.orchestratorAddress], {
        encoding: "utf8",
      });
      expect(r.status, r.stderr).toBe(0);
      const out = JSON.parse(r.stdout) as { surface: string; serializedBytes: number; tools: Array<{ name: string }> };
      expect(out.serializedBytes).toBe(Buffer.byteLength(JSON.stringify(out.tools)));
      sizes[mode] = out.serializedBytes;
      if (mode === "tool_search") expect(out.tools.map((t) => t.name)).toEqual(["tool_search", "tool_describe", "tool_call"]);
      if (mode === "tool_search_code") expect(out.surface).toBe("tool_search_code");
    }
    expect(sizes.tool_search_code).toBeLessThan(sizes.code!);
    const bad = spawnSync(process.execPath, [BIN, "surface", "--mode", "everything"], { encoding: "utf8" });
    expect(bad.status).toBe(2);
  });

  it("codemode exec --mode tool_search_code runs a program on that surface", () => {
    const r = spawnSync(
      process.execPath,
      [
        BIN,
        "exec",
        "--mode",
        "tool_search_code",
        "--tools",
        tools,
        "--sandbox",
        stack.sandboxAddress,
        "--orchestrator",
        stack.orchestratorAddress,
        "--code",
        'const [w] = await openclaw.tools.search("weather in a city"); return [typeof tools, w.id, await openclaw.tools.call(w.id, { city: "Oslo" })];',
      ],
      { encoding: "utf8" },
    );
    expect(r.status, r.stderr).toBe(0);
    const model = JSON.parse(r.stdout.trim()) as { status: string; value: unknown[]; telemetry: { modelVisibleTools: string[] } };
    expect(model.status).toBe("completed");
    expect(model.value.slice(0, 2)).toEqual(["undefined", "openclaw:core:weather"]);
    expect(model.telemetry.modelVisibleTools).toEqual(["tool_search_code"]);
  });
});

/**
 * The `codemode.run` contract as a run surface for gRPC gateways (SurfaceKind MCP_RUN,
 * selected with OpenRunRequest.mcp_run): DescribeSurface gives the one tool, Sandbox.Exec
 * takes the tool's arguments as `input_json`, MCP calls arrive as ToolCallRequested and are
 * answered with BridgeCallback, console entries stream as Output, and the Result's
 * model_json is the spec's response. Also what only a gateway can send: a tool whose input
 * schema has a non-object root (spec 5.3.1), hostile answers, and structured error answers.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ResultStatus, SurfaceKind } from "../../src/gen/codemode/common/v1/common_pb.js";
import type { ExecEvent } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { toWireMcpServer, toWireTool } from "../../src/shared/tool-wire.js";
import { scope as newScope, startStack, type Stack } from "../helpers/harness.js";

let stack: Stack;
beforeAll(async () => {
  stack = await startStack();
});
afterAll(async () => {
  await stack?.stop();
});

const TOOLS = [
  {
    name: "tag_all",
    description: "Takes an array of tags.",
    source: "mcp" as const,
    owner: "Docs.Store",
    parameters: { type: "array", items: { type: "string" } },
  },
  {
    name: "lookup",
    description: "Looks a word up.",
    source: "mcp" as const,
    owner: "Docs.Store",
    parameters: { type: "object", properties: { word: { type: "string" } }, required: ["word"] },
    annotations: { readOnlyHint: true },
  },
  { name: "core_tool", description: "Not an MCP tool.", source: "openclaw" as const, parameters: { type: "object" } },
];

async function open(mcpRun: Record<string, unknown> = { enabled: true }) {
  const scope = newScope("mcprun");
  const res = await stack.control.openRun({
    scope,
    catalog: { case: "tools", value: { tools: TOOLS.map(toWireTool), mcpServers: [toWireMcpServer({ name: "Docs.Store", title: "Docs", version: "2.0.0" })] } },
    policy: { allow: [], deny: [], allowNone: false },
    config: {},
    mcpRun,
  });
  return { scope, surface: res.surface! };
}

type Answer = (toolName: string, input: unknown) => { result?: unknown; error?: { name: string; message: string } };

async function exec(scope: ReturnType<typeof newScope>, args: Record<string, unknown> | undefined, answer: Answer, code?: string) {
  const events: ExecEvent[] = [];
  const stream = stack.sandbox.exec({
    scope,
    execCallId: "call-1",
    ...(args ? { inputJson: JSON.stringify(args) } : {}),
    ...(code !== undefined ? { code } : {}),
  });
  for await (const ev of stream) {
    events.push(ev);
    if (ev.event.case === "toolCall") {
      const c = ev.event.value;
      const a = answer(c.toolName, JSON.parse(c.inputJson));
      await stack.sandbox.bridgeCallback({
        scope,
        callId: c.callId,
        outcome: a.error ? { case: "error", value: a.error } : { case: "resultJson", value: JSON.stringify(a.result) },
      });
    }
  }
  const last = events.at(-1)!;
  if (last.event.case !== "result") throw new Error("no result");
  return {
    events,
    result: last.event.value,
    response: JSON.parse(last.event.value.modelJson) as { logs: unknown[]; result: unknown; diagnostics: Array<Record<string, unknown>>; toolTrace: unknown[] },
  };
}

describe("codemode.run as a gRPC run surface (MCP_RUN)", () => {
  it("G-1 OpenRun with mcp_run.enabled gives the MCP_RUN surface: exactly one tool, codemode.run, with its declarations", async () => {
    const { scope, surface } = await open();
    expect(surface.kind).toBe(SurfaceKind.MCP_RUN);
    expect(surface.codeModeActive).toBe(false);
    expect(surface.tools.map((t) => t.name)).toEqual(["codemode.run"]);
    const schema = JSON.parse(surface.tools[0]!.inputSchemaJson) as { required: string[]; properties: Record<string, unknown> };
    expect(schema.required).toEqual(["code"]);
    expect(Object.keys(schema.properties)).toEqual(["code", "limits", "requestedCapabilities"]);
    expect(surface.tools[0]!.description).toContain('declare module "@codemode/servers/docs-store"');
    const described = await stack.control.describeSurface({ scope });
    expect(described.surface!.toolsJson).toBe(surface.toolsJson);
  });

  it("G-2 Exec runs the codemode.run arguments from input_json: MCP calls as ToolCallRequested, logs as Output, the response as model_json", async () => {
    const { scope } = await open();
    const { events, result, response } = await exec(
      scope,
      {
        code: `import { lookup } from "@codemode/servers/docs-store"; console.log("looking"); globalThis.__codemode_result__ = await lookup({ word: "mcp" });`,
      },
      (name, input) => ({ result: { content: [{ type: "text", text: `${name}:${(input as { word: string }).word}` }] } }),
    );
    const call = events.find((e) => e.event.case === "toolCall")!.event.value as { toolId: string; toolName: string; sourceName: string; inputJson: string };
    expect(call).toMatchObject({ toolId: "mcp:Docs.Store:lookup", toolName: "lookup", sourceName: "Docs.Store", inputJson: '{"word":"mcp"}' });
    const out = events.filter((e) => e.event.case === "output").map((e) => (e.event.value as { kind: { case: string; value: string } }).kind);
    expect(out).toHaveLength(1);
    expect(out[0]!.case).toBe("json");
    expect(JSON.parse(out[0]!.value)).toMatchObject({ level: "log", message: "looking" });
    expect(result.status).toBe(ResultStatus.COMPLETED);
    expect(result.valueJson).toBe('"lookup:mcp"');
    expect(response).toMatchObject({ result: "lookup:mcp", diagnostics: [], toolTrace: [{ serverId: "docs-store", toolName: "lookup", ok: true }] });
    expect(result.telemetry?.modelVisibleTools).toEqual(["codemode.run"]);
  });

  it("G-3 a failing script is a FAILED result whose model_json is still the structured response", async () => {
    const { scope } = await open();
    const { result, response } = await exec(scope, { code: "const = 1;" }, () => ({ result: null }));
    expect(result.status).toBe(ResultStatus.FAILED);
    expect(response).toMatchObject({ result: null, diagnostics: [{ code: "SYNTAX_ERROR" }] });
    const bad = await exec(scope, { limits: 5 } as unknown as Record<string, unknown>, () => ({ result: null }));
    expect(bad.response.diagnostics[0]).toMatchObject({ code: "INVALID_REQUEST" });
  });

  it("G-4 R5.3.1-2 a non-object root input schema takes one value of that type, validated on the host", async () => {
    const { scope } = await open();
    const seen: unknown[] = [];
    const { response } = await exec(
      scope,
      {
        code: `
      import { tag_all } from "@codemode/servers/docs-store";
      const ok = await tag_all(["a", "b"]);
      let err; try { await tag_all("a"); } catch (e) { err = [e.name, e.path, e.expected]; }
      globalThis.__codemode_result__ = { ok, err };`,
      },
      (_name, input) => (seen.push(input), { result: { structuredContent: { count: (input as string[]).length } } }),
    );
    expect(seen).toEqual([["a", "b"]]);
    expect(response.result).toEqual({ ok: { count: 2 }, err: ["SchemaValidationError", "", "array"] });
  });

  it("G-5 a gateway's hostile answer cannot pollute prototypes; a structured error answer becomes its class with its hint", async () => {
    const { scope } = await open();
    const { response } = await exec(
      scope,
      {
        code: `
      import { lookup } from "@codemode/servers/docs-store";
      import { AuthenticationError } from "@codemode/errors";
      const v = await lookup({ word: "x" });
      let e; try { await lookup({ word: "y" }); } catch (err) { e = [err instanceof AuthenticationError, err.message, err.hint]; }
      globalThis.__codemode_result__ = [Object.prototype.hasOwnProperty.call(v, "__proto__"), ({}).polluted, v.polluted, e];`,
      },
      (_n, input) =>
        (input as { word: string }).word === "x"
          ? { result: JSON.parse('{"structuredContent":{"__proto__":{"polluted":true},"ok":1}}') as unknown }
          : { error: { name: "AuthenticationError", message: JSON.stringify({ message: "token expired", hint: "Ask the user to sign in again." }) } },
    );
    expect(response.result).toEqual([true, null, null, [true, "token expired", "Ask the user to sign in again."]]);
  });

  it("G-6 non-MCP catalog entries are not part of this surface; the trajectory records a codemode.run step with the response", async () => {
    const { scope } = await open();
    const { response } = await exec(
      scope,
      undefined,
      () => ({ result: null }),
      `import { listServers, searchTools } from "@codemode/discovery"; globalThis.__codemode_result__ = [(await listServers()).map((s) => s.serverId), (await searchTools("")).results.map((r) => r.toolName)];`,
    );
    expect(response.result).toEqual([["docs-store"], ["lookup", "tag_all"]]);
    const t = await stack.control.getTrajectory({ scope });
    const step = t.steps.at(-1)!;
    expect(step.kind).toBe("codemode.run");
    expect(JSON.parse(step.result!.text)).toMatchObject({ result: [["docs-store"], ["lookup", "tag_all"]] });
  });

  it("G-7 the run config sets each limit's default and maximum; a higher request is clamped and reported", async () => {
    const { scope, surface } = await open({ enabled: true, maxLogBytes: 4096n, maxToolCalls: 2 });
    expect(surface.tools[0]!.description).toContain("maxLogBytes 4096, maxToolCalls 2");
    const { response } = await exec(scope, { code: `globalThis.__codemode_result__ = 1;`, limits: { maxToolCalls: 50 } }, () => ({ result: null }));
    expect(response.diagnostics).toEqual([
      { severity: "info", code: "LIMIT_ADJUSTED", message: "limits.maxToolCalls 50 is above this host's maximum; 2 applies.", path: "/limits/maxToolCalls" },
    ]);
  });
});

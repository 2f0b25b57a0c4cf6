/**
 * Tool Search against real processes, part two: the seed's E2E comparison (direct
 * exposure, `tool_search_code` and `tool_search` on a catalog of 200+ real MCP tools
 * from bench/fixtures/mcp-catalog.json, all three calling the same tool, the Tool
 * Search payloads smaller), the fallback from mode code to mode tools when a program
 * cannot get an isolated runtime, and a sidecar whose pool cannot start at all exiting
 * non-zero with the reason instead of hanging without a ready line.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ResultStatus, SurfaceKind, ToolSource } from "../../src/gen/codemode/common/v1/common_pb.js";
import { toWireMcpServer, toWireTool, type GatewayMcpServer, type GatewayTool } from "../../src/shared/tool-wire.js";
import { BIN, collectStream, scope as newScope, startStack, type Stack, type ToolCallEvent } from "../helpers/harness.js";

type FixtureTool = { name: string; description?: string; inputSchema?: Record<string, unknown> };
type FixtureServer = { name: string; description?: string; tools: FixtureTool[] };
const fixture = JSON.parse(readFileSync(new URL("../../bench/fixtures/mcp-catalog.json", import.meta.url), "utf8")) as { servers: FixtureServer[] };

/** Real MCP servers, GitHub first, until the catalog has at least 250 tools. */
function realCatalog(): { tools: GatewayTool[]; servers: GatewayMcpServer[] } {
  const ordered = [...fixture.servers].sort((a, b) => (a.name === "github" ? -1 : b.name === "github" ? 1 : 0));
  const tools: GatewayTool[] = [];
  const servers: GatewayMcpServer[] = [];
  for (const s of ordered) {
    if (tools.length >= 250) break;
    servers.push({ name: s.name, ...(s.description ? { description: s.description } : {}) });
    for (const t of s.tools)
      tools.push({ name: t.name, description: t.description ?? "", parameters: t.inputSchema ?? { type: "object" }, source: "mcp", owner: s.name });
  }
  return { tools, servers };
}

describe("payload: direct exposure vs Tool Search (seed E2E)", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack(["--threads", "2"]);
  });
  afterAll(async () => {
    expect(await stack.stop()).toBe(0);
  });

  it("all three surfaces call the same tool; both Tool Search payloads are far smaller than direct", async () => {
    const catalog = realCatalog();
    expect(catalog.tools.length).toBeGreaterThanOrEqual(200);
    const TARGET = { id: "mcp:github:create_issue", name: "create_issue" };
    const INPUT = { owner: "openclaw", repo: "openclaw", title: "Crash on startup" };
    const handled: unknown[] = [];
    /** The gateway's tool implementation, whichever surface asked for it. */
    const createIssue = (input: unknown) => {
      handled.push(input);
      return { number: 42, url: "https://github.com/openclaw/openclaw/issues/42" };
    };
    const open = async (config: Record<string, unknown>, toolSearch?: Record<string, unknown>) => {
      const scope = newScope("payload");
      const res = await stack.control.openRun({
        scope,
        catalog: { case: "tools", value: { tools: catalog.tools.map(toWireTool), mcpServers: catalog.servers.map(toWireMcpServer) } },
        config,
        ...(toolSearch ? { toolSearch } : {}),
      });
      return { scope, surface: res.surface! };
    };
    const answer = (scope: ReturnType<typeof newScope>, seen: ToolCallEvent[]) => (call: ToolCallEvent) => {
      seen.push(call);
      void stack.sandbox.bridgeCallback({
        scope,
        callId: call.callId,
        outcome: { case: "resultJson", value: JSON.stringify(createIssue(JSON.parse(call.inputJson))) },
      });
    };

    // Direct: the model sees every schema and calls the tool by name; the gateway runs it itself.
    const direct = await open({ enabled: false });
    expect(direct.surface.kind).toBe(SurfaceKind.DIRECT);
    const directTool = direct.surface.tools.find((t) => t.name === TARGET.name)!;
    expect(JSON.parse(directTool.inputSchemaJson)).toMatchObject({ required: expect.arrayContaining(["owner", "repo", "title"]) });
    const directResult = createIssue(INPUT);

    // tool_search_code: one program searches, describes and calls.
    const code = await open({}, { enabled: true, mode: "code" });
    expect(code.surface.tools.map((t) => t.name)).toEqual(["tool_search_code"]);
    const seenCode: ToolCallEvent[] = [];
    const program = await collectStream(
      stack.sandbox.exec({
        scope: code.scope,
        execCallId: "e1",
        code: `const [hit] = await openclaw.tools.search("create a github issue", { limit: 5 });
               const tool = await openclaw.tools.describe(hit.id);
               return await openclaw.tools.call(tool.id, ${JSON.stringify(INPUT)});`,
      }),
      answer(code.scope, seenCode),
    );
    expect(program.model.status).toBe("completed");

    // tool_search / tool_describe / tool_call: three structured model calls.
    const tools = await open({}, { enabled: true, mode: "tools" });
    const found = await stack.sandbox.toolSearch({ scope: tools.scope, callId: "s1", query: "create a github issue", limit: 5 });
    expect(found.tools[0]!.id).toBe(TARGET.id);
    const described = await stack.sandbox.toolDescribe({ scope: tools.scope, callId: "d1", id: found.tools[0]!.id });
    expect(JSON.parse(described.parametersJson)).toEqual(JSON.parse(directTool.inputSchemaJson));
    const seenTools: ToolCallEvent[] = [];
    const called = await collectStream(
      stack.sandbox.toolCall({ scope: tools.scope, callId: "c1", id: TARGET.id, inputJson: JSON.stringify(INPUT) }),
      answer(tools.scope, seenTools),
    );
    expect(called.result.status).toBe(ResultStatus.COMPLETED);

    // The same tool, the same input, the same result on every surface.
    for (const seen of [seenCode, seenTools]) {
      expect(seen).toHaveLength(1);
      expect(seen[0]).toMatchObject({ toolId: TARGET.id, toolName: TARGET.name, source: ToolSource.MCP, sourceName: "github" });
    }
    expect(handled).toEqual([INPUT, INPUT, INPUT]);
    expect(program.model.value).toEqual(directResult);
    expect(JSON.parse(called.result.valueJson)).toEqual(directResult);

    // Telemetry and trajectory say which final tool was called and where it came from.
    expect(program.model.telemetry).toMatchObject({ catalogSize: catalog.tools.length, searchCount: 1, describeCount: 1, callCount: 1 });
    const steps = (await stack.control.getTrajectory({ scope: code.scope })).steps;
    expect(steps.map((s) => s.kind)).toEqual(["tool_search_code"]);
    expect(steps[0]!.nestedCalls[0]).toMatchObject({ toolId: TARGET.id, source: ToolSource.MCP, sourceName: "github", outcome: "ok" });

    const bytes = { direct: direct.surface.serializedBytes, tool_search_code: code.surface.serializedBytes, tool_search: tools.surface.serializedBytes };
    console.log(
      `model-visible tool bytes for ${catalog.tools.length} real MCP tools (${catalog.servers.length} servers):\n` +
        Object.entries(bytes)
          .map(([k, v]) => `  ${k.padEnd(17)} ${String(v).padStart(8)} bytes  (${((100 * v) / bytes.direct).toFixed(2)}% of direct)`)
          .join("\n"),
    );
    expect(bytes.tool_search_code).toBeLessThan(bytes.direct / 50);
    expect(bytes.tool_search).toBeLessThan(bytes.direct / 50);
    expect(code.surface.catalogSize).toBe(direct.surface.catalogSize);
  });
});

describe("fallback: mode code becomes mode tools when a program cannot get a runtime", () => {
  let stack: Stack;
  beforeAll(async () => {
    // One worker slot, and one surge thread at most: two busy programs elsewhere leave no
    // runtime for a Tool Search program.
    stack = await startStack(["--threads", "1", "--execs-per-worker", "1"]);
  });
  afterAll(async () => {
    expect(await stack.stop()).toBe(0);
  });

  it("Exec fails with runtime_unavailable, then DescribeSurface offers tool_search/tool_describe/tool_call", async () => {
    // Each busy program holds a thread once its first output arrives: the first the only
    // slot, the second (another session) the surge thread the pool adds for it.
    const hogs = [];
    for (const name of ["busy", "busy-too"]) {
      const busy = newScope(name);
      await stack.control.openRun({ scope: busy, catalog: { case: "tools", value: { tools: [] } }, config: { timeoutMs: 4_000 } });
      const hogEvents = stack.sandbox.exec({ scope: busy, code: 'console.log("busy"); while (true) {}' })[Symbol.asyncIterator]();
      expect((await hogEvents.next()).value?.event.case).toBe("output");
      hogs.push(collectStream({ [Symbol.asyncIterator]: () => hogEvents }));
    }

    const scope = newScope("fallback");
    const opened = await stack.control.openRun({
      scope,
      catalog: { case: "tools", value: { tools: [toWireTool({ name: "message", description: "Send a chat message" })] } },
      toolSearch: { enabled: true, codeTimeoutMs: 100 },
    });
    expect(opened.surface).toMatchObject({ kind: SurfaceKind.TOOL_SEARCH_CODE, fallback: false });
    const { model } = await collectStream(stack.sandbox.exec({ scope, code: "return 1" }));
    expect(model).toMatchObject({ status: "failed", code: "runtime_unavailable" });
    expect(model.error).toMatch(/^tool_search_code could not start an isolated runtime \(no sandbox worker became free in time\.\); this run falls back/);

    const { surface } = await stack.control.describeSurface({ scope });
    expect(surface).toMatchObject({
      kind: SurfaceKind.TOOL_SEARCH_TOOLS,
      fallback: true,
      fallbackReason: expect.stringContaining("no sandbox worker became free"),
    });
    expect(surface!.tools.map((t) => t.name)).toEqual(["tool_search", "tool_describe", "tool_call"]);
    const found = await stack.sandbox.toolSearch({ scope, query: "send a chat message" });
    expect(found.tools.map((t) => t.id)).toEqual(["openclaw:core:message"]);
    for (const hog of hogs) expect((await hog).model).toMatchObject({ status: "failed", code: "timeout" });

    // Opening the run again starts over in mode code.
    const reopened = await stack.control.openRun({ scope, catalog: { case: "tools", value: { tools: [] } }, toolSearch: { enabled: true } });
    expect(reopened.surface).toMatchObject({ kind: SurfaceKind.TOOL_SEARCH_CODE, fallback: false });
  });
});

describe("a pool that cannot start at all", () => {
  for (const command of ["start", "sandbox"]) {
    it(`codemode ${command} says why and exits non-zero, without a ready line`, async () => {
      // Node's permission model without --allow-worker denies worker threads: no surface can run.
      const args = [
        "--experimental-permission",
        "--allow-fs-read=*",
        BIN,
        command,
        "--sandbox-address",
        "127.0.0.1:0",
        "--orchestrator-address",
        command === "start" ? "127.0.0.1:0" : "127.0.0.1:1",
      ];
      const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "pipe"] });
      let stdout = "";
      let stderr = "";
      child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
      child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
      const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
      const [code] = (await once(child, "exit")) as [number | null];
      clearTimeout(timer);
      expect(code).toBe(1);
      expect(stdout).not.toContain("ready");
      expect(stderr).toContain("codemode: the sandbox pool cannot start, so no code can run: worker threads are denied");
    });
  }
});

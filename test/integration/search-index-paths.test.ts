/**
 * Every path that reads a catalog version's search index waits for the copy built on the
 * sidecar's index worker thread, against real processes: on a ~2,000-tool catalog whose
 * index was never read before, the first reader is codemode.run's own searchTools, a
 * code-mode "did you mean" (tools.describe and tools.call of an unknown id), a
 * tool_search_code call of an unknown id, or the structured ToolCall and ToolDescribe
 * of an unknown id. Each answer is right, and the sidecar's log says the version's index
 * was built once, on the worker thread (a reader that did not wait would have built it
 * on the main thread first). Each scenario has its own catalog size, so its log lines are
 * told apart by their tool count. An exec that reads no index (a known id described and
 * called) completes with its answer. Timing is not asserted.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ResultStatus } from "../../src/gen/codemode/common/v1/common_pb.js";
import { toWireMcpServer, toWireTool } from "../../src/shared/tool-wire.js";
import { collectStream, logged, scope as newScope, startStack, type Stack, type ToolCallEvent } from "../helpers/harness.js";
import { largeCatalog, parseLogLine } from "../helpers/search-catalog.js";

type Surface = { toolSearch?: { enabled: boolean }; mcpRun?: { enabled: boolean } };

describe("every reader of the search index waits for the worker-built index", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack(["--threads", "2"]);
  });
  afterAll(async () => {
    expect(await stack.stop()).toBe(0);
  });

  /** Opens a run on a fresh catalog of `size` tools (its own version) with the given surface. */
  const open = async (marker: string, size: number, surface: Surface) => {
    const scope = newScope(marker);
    const c = largeCatalog(marker, size);
    expect(c.tools.length).toBe(size);
    await stack.control.openRun({
      scope,
      catalog: { case: "tools", value: { tools: c.tools.map(toWireTool), mcpServers: c.servers.map(toWireMcpServer) } },
      ...surface,
    });
    return scope;
  };
  /** The version of `size` tools had its index built once, on the worker thread. */
  const builtOnWorker = async (size: number) => {
    const built = parseLogLine(await logged(stack.proc, new RegExp(`^(?=.*"search index built")(?=.*"tools":${size}\\b)`)));
    expect(built).toMatchObject({ tools: size, thread: "worker" });
    expect(stack.proc.stderr.filter((l) => /"search index built"/.test(l) && l.includes(built.catalogVersion!))).toHaveLength(1);
    expect(
      stack.proc.stderr.some((l) => /worker thread unavailable/.test(l) || (/building it on the main thread/.test(l) && l.includes(built.catalogVersion!))),
    ).toBe(false);
  };
  const run = async (scope: ReturnType<typeof newScope>, request: { code?: string; inputJson?: string }, onToolCall?: (c: ToolCallEvent) => void) => {
    const { result, model } = await collectStream(stack.sandbox.exec({ scope, ...request }), onToolCall);
    expect(result.status, JSON.stringify(model)).toBe(ResultStatus.COMPLETED);
    return { result, value: model.value };
  };

  it("codemode.run's searchTools", async () => {
    const scope = await open("paths_mcp_run_marker", 2001, { mcpRun: { enabled: true } });
    const code = `import { searchTools } from "@codemode/discovery"; globalThis.__codemode_result__ = (await searchTools("create a github issue", { limit: 3 })).results.map((r) => [r.serverId, r.toolName]);`;
    const { result } = await run(scope, { inputJson: JSON.stringify({ code }) });
    const hits = JSON.parse(result.valueJson) as string[][];
    expect(hits[0]).toEqual(["github", "create_issue"]);
    expect(hits).toHaveLength(3);
    await builtOnWorker(2001);
  });

  it("code mode's tools.describe of an unknown id (did you mean)", async () => {
    const scope = await open("paths_describe_marker", 2002, {});
    const { value } = await run(scope, {
      code: `try { await tools.describe("openclaw:core:paths_describe_markr"); return "found"; } catch (e) { return e.message; }`,
    });
    expect(value).toMatch(/^unknown tool id "openclaw:core:paths_describe_markr"\. Did you mean: openclaw:core:paths_describe_marker/);
    await builtOnWorker(2002);
  });

  it("code mode's tools.call of an unknown id (did you mean)", async () => {
    const scope = await open("paths_call_marker", 2003, {});
    const { value } = await run(scope, {
      code: `try { await tools.call("openclaw:core:paths_call_markr", {}); return "called"; } catch (e) { return e.message; }`,
    });
    expect(value).toMatch(/^unknown tool id "openclaw:core:paths_call_markr"\. Did you mean: openclaw:core:paths_call_marker/);
    await builtOnWorker(2003);
  });

  it("tool_search_code's openclaw.tools.call of an unknown id (did you mean)", async () => {
    const scope = await open("paths_tsc_marker", 2004, { toolSearch: { enabled: true } });
    const { value } = await run(scope, {
      code: `try { await openclaw.tools.call("mcp:github:create_issu", {}); return "called"; } catch (e) { return e.message; }`,
    });
    expect(value).toMatch(/^unknown tool id "mcp:github:create_issu"\. Did you mean: mcp:github:create_issue\b/);
    await builtOnWorker(2004);
  });

  it("the structured ToolCall of an unknown id (did you mean)", async () => {
    const scope = await open("paths_tool_call_marker", 2005, { toolSearch: { enabled: true } });
    const { result, events } = await collectStream(stack.sandbox.toolCall({ scope, callId: "m1", id: "mcp:github:create_issu", inputJson: "{}" }));
    expect(events.some((e) => e.event.case === "toolCall")).toBe(false);
    expect(result.status).toBe(ResultStatus.FAILED);
    expect(result.error).toMatch(/^ToolNotFound: unknown tool id "mcp:github:create_issu"\. Did you mean: mcp:github:create_issue\b/);
    await builtOnWorker(2005);
  });

  it("the structured ToolDescribe of an unknown id (did you mean)", async () => {
    const scope = await open("paths_tool_describe_marker", 2006, { toolSearch: { enabled: true } });
    const described = await stack.sandbox.toolDescribe({ scope, callId: "m1", id: "mcp:github:create_issu" });
    expect(described.error).toMatchObject({ name: "ToolNotFound", message: expect.stringMatching(/Did you mean: mcp:github:create_issue\b/) });
    await builtOnWorker(2006);
  });

  it("an exec that reads no index (a known id described and called) completes; its version's index is still built on the worker", async () => {
    const scope = await open("paths_known_marker", 2007, {});
    const id = "openclaw:core:paths_known_marker";
    const { value } = await run(scope, { code: `const d = await tools.describe(${JSON.stringify(id)}); return [d.name, await tools.call(d.id, {})];` }, (c) => {
      expect(c.toolId).toBe(id);
      void stack.sandbox.bridgeCallback({ scope, callId: c.callId, outcome: { case: "resultJson", value: '"done"' } });
    });
    expect(value).toEqual(["paths_known_marker", "done"]);
    await builtOnWorker(2007);
  });
});

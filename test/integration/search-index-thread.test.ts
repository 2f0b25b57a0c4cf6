/**
 * The search index of a catalog version is built off the sidecar's main thread, against
 * real processes: on a 2,000-tool catalog (real MCP servers of bench/fixtures, padded
 * with copies under other names) the first search is answered correctly, the log says
 * the index was built on the worker thread and what it cost the main thread, and execs
 * that do not search complete while it is built once for their version. (That they never
 * wait for it is the code's structure: only a search, or the "did you mean" of an unknown
 * id, awaits the index; ./search-index-paths.test.ts covers each reader. Timing is not
 * asserted: the machines are shared and noisy.)
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ResultStatus } from "../../src/gen/codemode/common/v1/common_pb.js";
import { toWireMcpServer, toWireTool } from "../../src/shared/tool-wire.js";
import { collectStream, logged, scope as newScope, startStack, type Stack } from "../helpers/harness.js";
import { largeCatalog as catalog, parseLogLine as parse } from "../helpers/search-catalog.js";

describe("search index built off the main thread", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack(["--threads", "2"]);
  });
  afterAll(async () => {
    expect(await stack.stop()).toBe(0);
  });

  const open = async (marker: string) => {
    const scope = newScope(marker);
    const c = catalog(marker);
    expect(c.tools.length).toBe(2000);
    await stack.control.openRun({
      scope,
      catalog: { case: "tools", value: { tools: c.tools.map(toWireTool), mcpServers: c.servers.map(toWireMcpServer) } },
      toolSearch: { enabled: true },
    });
    return scope;
  };
  const run = async (scope: ReturnType<typeof newScope>, code: string) => {
    const { result, model } = await collectStream(stack.sandbox.exec({ scope, code }));
    expect(result.status, JSON.stringify(model)).toBe(ResultStatus.COMPLETED);
    return model.value;
  };

  it("answers a 2,000-tool catalog's first search correctly, with the index built on the worker thread", async () => {
    const scope = await open("first_search_marker");
    const code =
      "return [await openclaw.tools.search('create a github issue', { limit: 5 }), await openclaw.tools.search('read a file from disk', { limit: 5 })]";
    const first = (await run(scope, code)) as Array<Array<{ id: string; name: string; sourceName?: string; description: string }>>;
    expect(first[0]![0]).toMatchObject({ id: "mcp:github:create_issue", name: "create_issue", sourceName: "github" });
    expect(first[0]).toHaveLength(5);
    expect(first[1]!.length).toBe(5);
    expect(first[1]!.some((e) => /read/i.test(e.name))).toBe(true);
    // The same index afterwards: the same answers.
    expect(await run(scope, code)).toEqual(first);

    const cached = parse(await logged(stack.proc, /^(?=.*"catalog view cached")(?=.*"tools":2000)/));
    const built = parse(await logged(stack.proc, new RegExp(`^(?=.*"search index built")(?=.*"catalogVersion":"${cached.catalogVersion}")`)));
    expect(built).toMatchObject({ tools: 2000, thread: "worker" });
    expect(built.indexBuildMs).toBeGreaterThan(0);
    // The main thread's own share (handing the catalog over, decoding the index) is measured, not left at 0.
    expect(built.mainThreadMs).toBeGreaterThan(0);
    expect(stack.proc.stderr.some((l) => /worker thread unavailable/.test(l))).toBe(false);
  });

  it("execs that do not search complete, and the version's index is built once, on the worker", async () => {
    const scope = await open("no_search_marker");
    // The catalog view (and its index build) starts with this exec's resolve.
    for (let i = 0; i < 3; i++) expect(await run(scope, `return ${i} + 1`)).toBe(i + 1);
    const views = stack.proc.stderr.filter((l) => /"catalog view cached"/.test(l)).map(parse);
    const version = views[views.length - 1]!.catalogVersion!;
    const built = parse(await logged(stack.proc, new RegExp(`^(?=.*"search index built")(?=.*"catalogVersion":"${version}")`)));
    expect(built.thread).toBe("worker");
    // A search on the same version now finds the index built.
    const hits = (await run(scope, "return await openclaw.tools.search('no search marker', { limit: 1 })")) as Array<{ name: string }>;
    expect(hits[0]!.name).toBe("no_search_marker");
    expect(stack.proc.stderr.filter((l) => /"search index built"/.test(l) && l.includes(version))).toHaveLength(1);
  });
});

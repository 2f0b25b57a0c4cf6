/**
 * MCP in code mode, against real processes: a run with core, plugin, client and two MCP
 * servers (one tool denied). The seed's E2E steps 9-10 and validation items: the virtual
 * API files (`API.list("mcp")`, `API.read(...)`, each a strict-clean declaration file),
 * `MCP.<server>.<function>()` reaching the gateway with the exact catalog id, `$api()`,
 * resources and prompts, MCP entries absent from ALL_TOOLS and tools.*, the denied tool
 * absent everywhere, path refusals, and a pending MCP call resumed through `wait`.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ToolSource } from "../../src/gen/codemode/common/v1/common_pb.js";
import { gatewayExec, openRun, type TestTool } from "../helpers/gateway.js";
import { logged, startStack, waitFor, type Stack } from "../helpers/harness.js";
import { typecheck } from "../helpers/typecheck.js";

const obj = (properties: Record<string, unknown>, required: string[] = []) => ({ type: "object", properties, required });

const CATALOG: TestTool[] = [
  { name: "message", description: "Send a message to a channel.", parameters: obj({ text: { type: "string" } }, ["text"]) },
  { name: "browser_request", owner: "browser", origin: "bundled_plugin", description: "Fetch a page in the browser plugin." },
  { name: "select_file", source: "client", owner: "app", description: "Ask the user to pick a file." },
  {
    name: "create_issue",
    source: "mcp",
    owner: "github",
    description: "Create a GitHub issue.",
    parameters: obj(
      {
        owner: { type: "string", description: "Repository owner" },
        repo: { type: "string", description: "Repository name" },
        title: { type: "string" },
        body: { type: "string" },
      },
      ["owner", "repo", "title"],
    ),
    annotations: { destructiveHint: false, idempotentHint: false },
    handler: (input) => ({ content: [{ type: "text", text: `created ${(input as { title: string }).title}` }], structuredContent: { number: 42 } }),
  },
  {
    name: "list_issues",
    source: "mcp",
    owner: "github",
    description: "List issues of a repository.",
    parameters: obj({ state: { enum: ["open", "closed", "all"] } }),
    annotations: { readOnlyHint: true },
  },
  { name: "delete_repo", source: "mcp", owner: "github", description: "Delete a repository forever.", parameters: obj({ repo: { type: "string" } }, ["repo"]) },
  {
    name: "take_snapshot",
    source: "mcp",
    owner: "chrome-devtools",
    description: "Take a text snapshot of the page.",
    parameters: obj({ output: { type: "string", enum: ["markdown", "json"] } }),
    outputSchema: obj({ text: { type: "string" }, nodes: { type: "integer" } }, ["text"]),
    examples: [{ output: "markdown" }],
  },
  {
    name: "navigate_page",
    source: "mcp",
    owner: "chrome-devtools",
    description: "Go to a URL.",
    parameters: obj({ url: { type: "string", format: "uri" } }, ["url"]),
  },
];

const SERVERS = [
  {
    name: "github",
    serverId: "github-mcp-server",
    version: "1.2.3",
    description: "GitHub repositories, issues and pull requests.",
    instructions: "Prefer list before create.",
    resources: true,
    prompts: true,
  },
  { name: "chrome-devtools", title: "Chrome DevTools", description: "Drive a Chrome browser." },
];

/** What the gateway answers for MCP resource and prompt operations (not catalog tools). */
const OPS: TestTool[] = [
  {
    name: "resources/list",
    source: "mcp",
    owner: "github",
    handler: (input) => ({ resources: [{ uri: "memo://one", name: "One" }], nextCursor: `after-${(input as { cursor?: string }).cursor ?? "start"}` }),
  },
  {
    name: "prompts/list",
    source: "mcp",
    owner: "github",
    handler: (input) => ({ prompts: [{ name: "brief", arguments: [{ name: "topic" }] }], echoed: input }),
  },
  { name: "resources/read", source: "mcp", owner: "github", handler: (input) => ({ contents: [{ uri: (input as { uri: string }).uri, text: "memo" }] }) },
  {
    name: "prompts/get",
    source: "mcp",
    owner: "github",
    handler: (input) => ({ messages: [{ role: "user", content: { type: "text", text: `brief on ${JSON.stringify(input)}` } }] }),
  },
];

describe("MCP namespace and API files", () => {
  let stack: Stack;
  let scope: Awaited<ReturnType<typeof openRun>>["scope"];
  let surfaceDescription = "";

  beforeAll(async () => {
    stack = await startStack();
    const opened = await openRun(stack, CATALOG, { deny: ["mcp:github:delete_repo"] }, { mcpServers: SERVERS });
    scope = opened.scope;
    surfaceDescription = opened.response.surface?.tools.find((t) => t.name === "exec")?.description ?? "";
  });
  afterAll(async () => {
    expect(await stack.stop()).toBe(0);
  });

  const run = (code: string, config: Record<string, unknown> = {}) => gatewayExec(stack, scope, [...CATALOG, ...OPS], code, config);

  it('API.list("mcp") lists the index and one file per visible server, and every file type-checks under --strict', async () => {
    const out = await run(`
      const files = await API.list("mcp");
      const texts = {};
      for (const f of files) texts[f.path] = await API.read(f.path);
      return { files, texts, all: await API.list() };
    `);
    expect(out.model.status).toBe("completed");
    const value = out.model.value as { files: Array<{ path: string; bytes: number; description: string }>; texts: Record<string, string>; all: unknown[] };
    expect(value.files.map((f) => f.path)).toEqual(["mcp/index.d.ts", "mcp/chromeDevtools.d.ts", "mcp/github.d.ts"]);
    expect(value.all).toEqual(value.files);
    for (const f of value.files) expect(f.bytes).toBe(Buffer.byteLength(value.texts[f.path]!, "utf8"));
    expect(typecheck(value.texts)).toEqual([]);
    const github = value.texts["mcp/github.d.ts"]!;
    expect(github).toContain("declare namespace MCP.github");
    expect(github).toMatch(/function createIssue\(input: \{/);
    expect(github).toContain("listIssues");
    expect(github).toContain("Repository owner");
    expect(github).not.toMatch(/delete_?repo|deleteRepo/i);
    expect(github).toMatch(/namespace resources/);
    expect(github).toMatch(/namespace prompts/);
    const chrome = value.texts["mcp/chromeDevtools.d.ts"]!;
    expect(chrome).toContain("takeSnapshot");
    expect(chrome).not.toMatch(/namespace resources/);
    // The output schema types structuredContent: a program using it type-checks, a wrong use does not.
    expect(
      typecheck({
        ...value.texts,
        "use.ts": `async function f() {
          const r = await MCP.chromeDevtools.takeSnapshot({ output: "markdown" });
          const t: string | undefined = r.structuredContent?.text;
          // @ts-expect-error output is an enum
          await MCP.chromeDevtools.takeSnapshot({ output: "html" });
          // @ts-expect-error title is required
          await MCP.github.createIssue({ owner: "o", repo: "r" });
          return t;
        }
        export {};`,
      }),
    ).toEqual([]);
  });

  it("MCP.<server>.<function>() reaches the gateway with the exact catalog id and returns its answer", async () => {
    const out = await run(`
      const issue = await MCP.github.createIssue({ owner: "openclaw", repo: "openclaw", title: "Investigate gateway logs" });
      const snap = await MCP.chromeDevtools.takeSnapshot({ output: "markdown" });
      return { issue, snap, keys: Object.keys(MCP), fns: Object.keys(MCP.github) };
    `);
    expect(out.model.status).toBe("completed");
    const value = out.model.value as { issue: unknown; keys: string[]; fns: string[] };
    expect(value.issue).toEqual({ content: [{ type: "text", text: "created Investigate gateway logs" }], structuredContent: { number: 42 } });
    expect(value.keys).toEqual(["chromeDevtools", "github"]);
    expect(value.fns.sort()).toEqual(["createIssue", "listIssues", "prompts", "resources"]);
    const calls = out.answered.map((a) => a.call);
    expect(calls.map((c) => c.toolId)).toEqual(["mcp:github:create_issue", "mcp:chrome-devtools:take_snapshot"]);
    expect(calls[0]!.source).toBe(ToolSource.MCP);
    expect(calls[0]!.sourceName).toBe("github");
    expect(calls[0]!.toolName).toBe("create_issue");
    expect(out.answered[0]!.input).toEqual({ owner: "openclaw", repo: "openclaw", title: "Investigate gateway logs" });
    expect(out.model.telemetry.callCount).toBeGreaterThanOrEqual(2);
  });

  it("takes exactly one object argument", async () => {
    const out = await run(`
      const errors = [];
      for (const bad of [[1], ["x"], [null], [[1, 2]]]) {
        try { await MCP.github.listIssues(...bad); } catch (e) { errors.push(e.name + ": " + e.message); }
      }
      await MCP.github.listIssues();
      return errors;
    `);
    expect(out.model.status).toBe("completed");
    expect(out.model.value).toEqual(Array(4).fill("TypeError: MCP.github.listIssues takes one object argument, e.g. MCP.github.listIssues({ ... })."));
    expect(out.answered.map((a) => a.input)).toEqual([{}]);
  });

  it("$api() returns the server header, or one tool's declaration and schemas", async () => {
    const out = await run(`
      const all = await MCP.github.$api();
      const one = await MCP.github.$api("create_issue", { schema: true });
      const byFunction = await MCP.chromeDevtools.$api("takeSnapshot");
      let missing;
      try { await MCP.github.$api("delete_repo"); } catch (e) { missing = e.name + ": " + e.message; }
      return { all, one, byFunction, missing };
    `);
    expect(out.model.status).toBe("completed");
    const v = out.model.value as Record<string, Record<string, unknown>> & { missing: string };
    expect(v.all!.namespace).toBe("MCP.github");
    expect(v.all!.path).toBe("mcp/github.d.ts");
    expect((v.all!.tools as Array<{ function: string }>).map((t) => t.function)).toEqual(["createIssue", "listIssues"]);
    expect(v.one!.declarations).toContain("createIssue");
    expect(v.one!.declarations).not.toContain("listIssues");
    expect((v.one!.schema as { input: { required: string[] } }).input.required).toEqual(["owner", "repo", "title"]);
    expect(v.byFunction!.schema).toBeUndefined();
    expect((v.byFunction!.tools as Array<{ id: string }>)[0]!.id).toBe("mcp:chrome-devtools:take_snapshot");
    expect(v.missing).toMatch(/^NotFound: MCP\.github has no tool "delete_repo"/);
    expect(out.answered).toEqual([]);
  });

  it("resources and prompts cross to the gateway as nested calls with documented ids", async () => {
    const out = await run(`
      const resources = await MCP.github.resources.list({ cursor: "page-2" });
      const resource = await MCP.github.resources.read({ uri: "memo://one" });
      const prompts = await MCP.github.prompts.list();
      const prompt = await MCP.github.prompts.get({ name: "brief", arguments: { topic: "release" } });
      return { resources, resource, prompts, prompt, chrome: typeof MCP.chromeDevtools.resources };
    `);
    expect(out.model.status).toBe("completed");
    expect(out.answered.map((a) => [a.call.toolId, a.call.toolName, a.call.sourceName, a.call.source, a.input])).toEqual([
      ["mcp:github:resources/list", "resources/list", "github", ToolSource.MCP, { cursor: "page-2" }],
      ["mcp:github:resources/read", "resources/read", "github", ToolSource.MCP, { uri: "memo://one" }],
      ["mcp:github:prompts/list", "prompts/list", "github", ToolSource.MCP, {}],
      ["mcp:github:prompts/get", "prompts/get", "github", ToolSource.MCP, { name: "brief", arguments: { topic: "release" } }],
    ]);
    const v = out.model.value as { resources: unknown; resource: unknown; prompts: unknown; prompt: unknown; chrome: string };
    expect(v.resources).toEqual({ resources: [{ uri: "memo://one", name: "One" }], nextCursor: "after-page-2" });
    expect(v.resource).toEqual({ contents: [{ uri: "memo://one", text: "memo" }] });
    expect(v.prompts).toEqual({ prompts: [{ name: "brief", arguments: [{ name: "topic" }] }], echoed: {} });
    expect(v.prompt).toEqual({ messages: [{ role: "user", content: { type: "text", text: 'brief on {"name":"brief","arguments":{"topic":"release"}}' } }] });
    expect(v.chrome).toBe("undefined");
    const trajectory = await stack.control.getTrajectory({ scope });
    expect(trajectory.steps.at(-1)?.nestedCalls.map((n) => [n.toolId, n.outcome])).toEqual([
      ["mcp:github:resources/list", "ok"],
      ["mcp:github:resources/read", "ok"],
      ["mcp:github:prompts/list", "ok"],
      ["mcp:github:prompts/get", "ok"],
    ]);
  });

  it("MCP entries are absent from ALL_TOOLS and tools.*, and tools.call refuses MCP ids", async () => {
    const out = await run(`
      const ids = ALL_TOOLS.map((t) => t.id);
      const found = await tools.search("issue snapshot github create", { limit: 50 });
      let refused;
      try { await tools.call("mcp:github:create_issue", { title: "x" }); } catch (e) { refused = e.message; }
      return { ids, found: found.map((t) => t.id), refused, conv: typeof tools.create_issue };
    `);
    expect(out.model.status).toBe("completed");
    const v = out.model.value as { ids: string[]; found: string[]; refused: string; conv: string };
    expect(v.ids).toEqual(["openclaw:core:message", "openclaw:browser:browser_request", "client:app:select_file"]);
    expect(v.found.every((id) => !id.startsWith("mcp:"))).toBe(true);
    expect(v.refused).toMatch(/MCP tool; MCP tools are called through the MCP namespace/);
    expect(v.conv).toBe("undefined");
    expect(out.answered).toEqual([]);
  });

  it("the denied MCP tool is absent from MCP, the API files and search, and cannot be called by a guessed id", async () => {
    const out = await run(`
      const texts = [];
      for (const f of await API.list("")) texts.push(await API.read(f.path));
      let guessed;
      try { await tools.call("mcp:github:delete_repo", { repo: "x" }); } catch (e) { guessed = e.message; }
      let described;
      try { await tools.describe("mcp:github:delete_repo"); } catch (e) { described = e.message; }
      const hits = await tools.search("delete repository", { limit: 50 });
      return { fn: typeof MCP.github.deleteRepo, inFiles: texts.some((t) => /delete/i.test(t)), guessed, described, hits };
    `);
    expect(out.model.status).toBe("completed");
    const v = out.model.value as Record<string, unknown> & { hits: Array<{ id: string; description: string }> };
    expect(v.fn).toBe("undefined");
    expect(v.inFiles).toBe(false);
    expect(v.guessed).toMatch(/unknown tool id/);
    expect(v.described).toMatch(/unknown tool id/);
    // Code mode's search leaves MCP entries out: whatever it finds, never the denied tool.
    expect(v.hits.map((h) => h.id).filter((id) => id.startsWith("mcp:"))).toEqual([]);
    expect(JSON.stringify(v.hits)).not.toMatch(/delete_repo|Delete a repository/);
    expect(out.answered).toEqual([]);

    // With searchIncludesMcp, search lists the visible MCP entries too, but never the denied one.
    const probe = `
      const query = await tools.search("delete a repository forever", { limit: 50 });
      const all = await tools.search("", { limit: 50 });
      return { query: query.map((t) => t.id), calls: query.map((t) => t.call ?? null), all: all.map((t) => t.id), text: JSON.stringify([query, all]) };
    `;
    type Probe = { query: string[]; calls: Array<string | null>; all: string[]; text: string };
    const denied = await run(probe, { searchIncludesMcp: true });
    expect(denied.model.status).toBe("completed");
    const d = denied.model.value as Probe;
    const visible = [
      "openclaw:core:message",
      "openclaw:browser:browser_request",
      "client:app:select_file",
      "mcp:github:create_issue",
      "mcp:github:list_issues",
      "mcp:chrome-devtools:take_snapshot",
      "mcp:chrome-devtools:navigate_page",
    ];
    expect([...d.all].sort()).toEqual([...visible].sort());
    expect(d.query.length).toBeGreaterThan(0);
    expect(d.query).not.toContain("mcp:github:delete_repo");
    expect(d.text).not.toMatch(/delete_repo|deleteRepo|Delete a repository/);
    expect(denied.answered).toEqual([]);

    // Control: the same catalog without the deny finds the tool first, so its absence above is the policy's doing.
    const open = await openRun(stack, CATALOG, {}, { mcpServers: SERVERS });
    const allowed = await gatewayExec(stack, open.scope, [...CATALOG, ...OPS], probe, { searchIncludesMcp: true });
    expect(allowed.model.status).toBe("completed");
    const a = allowed.model.value as Probe;
    expect(a.query[0]).toBe("mcp:github:delete_repo");
    expect(a.calls[0]).toBe("MCP.github.deleteRepo");
    expect([...a.all].sort()).toEqual([...visible, "mcp:github:delete_repo"].sort());
  });

  it("API.read refuses `..`, absolute paths and unknown files with clear errors", async () => {
    const out = await run(`
      const errors = [];
      for (const p of ["../etc/passwd", "mcp/../mcp/index.d.ts", "/mcp/index.d.ts", "mcp/./index.d.ts", "mcp/gitlab.d.ts", "C:/x"]) {
        try { await API.read(p); errors.push("read " + p); } catch (e) { errors.push(e.name + ": " + e.message); }
      }
      try { await API.list("../"); } catch (e) { errors.push(e.name + ": " + e.message); }
      return errors;
    `);
    expect(out.model.status).toBe("completed");
    const errors = out.model.value as string[];
    expect(errors[0]).toMatch(/TypeError: API\.read path "\.\.\/etc\/passwd" must not contain "\." or "\.\." segments/);
    expect(errors[1]).toMatch(/must not contain/);
    expect(errors[2]).toMatch(/must be a relative path/);
    expect(errors[3]).toMatch(/must not contain/);
    expect(errors[4]).toMatch(/^NotFound: no API file "mcp\/gitlab\.d\.ts"\. Files: mcp\/index\.d\.ts, mcp\/chromeDevtools\.d\.ts, mcp\/github\.d\.ts/);
    expect(errors[5]).toMatch(/must be a relative path/);
    expect(errors[6]).toMatch(/API\.list prefix/);
  });

  it("the exec description teaches API/MCP only when MCP tools are visible", async () => {
    expect(surfaceDescription).toContain('API.list("mcp")');
    expect(surfaceDescription).toContain("MCP.<server>.<tool>");
    const plain = await openRun(
      stack,
      CATALOG.filter((t) => t.source !== "mcp"),
    );
    const text = plain.response.surface?.tools.find((t) => t.name === "exec")?.description ?? "";
    expect(text).not.toMatch(/MCP|API\./);
    const out = await gatewayExec(stack, plain.scope, CATALOG, `return { mcp: Object.keys(MCP), files: await API.list("mcp") }`);
    expect(out.model.value).toEqual({ mcp: [], files: [] });
  });

  it("a pending MCP call suspends at the timeout and resumes through wait", async () => {
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => (release = r));
    const slow: TestTool[] = CATALOG.map((t) =>
      t.name === "list_issues" ? { ...t, handler: async () => (await gate, { content: [{ type: "text", text: "3 open" }] }) } : t,
    );
    // The exec returns `waiting` while the gateway still holds the call; the gateway answers
    // once the sidecar logged that result (gatewayExec itself resolves only after its answers).
    const returned = logged(stack.proc, new RegExp(`"agentRunId":"${scope.agentRunId}".*"status":"waiting".*"msg":"exec finished"`), {
      ms: 30_000,
      from: stack.proc.stderr.length,
    }).finally(release);
    const first = await gatewayExec(
      stack,
      scope,
      slow,
      `text("before"); const r = await MCP.github.listIssues({ state: "open" }); text("after"); return r.content[0].text;`,
      { timeoutMs: 1500 },
    );
    await returned;
    // So the answer was given after the exec had already returned waiting: it is stored with the suspended run.
    expect(first.model.status).toBe("waiting");
    expect(first.model.pendingToolCalls).toEqual([expect.objectContaining({ toolId: "mcp:github:list_issues" })]);
    const resumed = await waitFor(stack.sandbox, { scope, runId: first.model.runId! });
    expect(resumed.model.status).toBe("completed");
    expect(resumed.model.value).toBe("3 open");
    expect(resumed.model.output).toEqual([{ type: "text", text: "after" }]);
  });
});

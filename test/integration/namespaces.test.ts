/**
 * Internal namespaces against real processes, one test per item of the seed's
 * "Internal namespaces → Test checklist", plus the registration rules (ownership,
 * globalName collisions, scope serialization) and the CLI gateway's `namespaces` export.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { namespaceContext, namespaceTool, NamespaceScopeError, serializeNamespaceScope } from "../../src/shared/namespace-scope.js";
import { NamespaceCatalog } from "../../src/sandbox/catalog/namespace-catalog.js";
import { gatewayExec, openRun, type TestTool } from "../helpers/gateway.js";
import { BIN, logged, startStack, waitFor, type Stack } from "../helpers/harness.js";

const GITHUB: TestTool[] = [
  {
    name: "github_list_issues",
    owner: "github",
    origin: "external_plugin",
    description: "List issues.",
    handler: (input) => [{ number: 1, state: (input as { state?: string }).state ?? "any", title: "Login bug" }],
  },
  {
    name: "github_update_issue",
    owner: "github",
    origin: "external_plugin",
    description: "Update an issue.",
    handler: (input) => {
      const { number, patch } = input as { number: number; patch: unknown };
      if (number === 404) throw Object.assign(new Error("issue 404 does not exist"), { name: "NotFound" });
      return { number, patch, updated: true };
    },
  },
];

function registration(
  extra: Partial<{ pluginId: string; id: string; globalName: string; description: string; prompt: string; requiredToolNames: string[]; scope: unknown }> = {},
) {
  const scope = extra.scope ?? {
    repository: { owner: "openclaw", name: "openclaw" },
    list: namespaceTool("github_list_issues"),
    update: namespaceTool("github_update_issue", ["number", "patch"]),
  };
  return {
    pluginId: extra.pluginId ?? "github",
    id: extra.id ?? "github-issues",
    globalName: extra.globalName ?? "Issues",
    description: extra.description ?? "GitHub issue helpers for the current repository.",
    prompt: extra.prompt ?? "Use Issues.list(params) and Issues.update(number, patch).",
    requiredToolNames: extra.requiredToolNames ?? ["github_list_issues", "github_update_issue"],
    scopeJson: serializeNamespaceScope(scope),
  };
}

/** The service error code a client call failed with ("already_exists", "invalid_argument", ...). */
function errorCode(err: unknown): string | undefined {
  return (err as { code?: string }).code;
}

describe("internal namespaces", () => {
  let stack: Stack;

  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(async () => {
    expect(await stack.stop()).toBe(0);
  });
  afterEach(async () => {
    for (const pluginId of ["github", "evil", "calendar"]) await stack.control.clearNamespaces({ pluginId });
  });

  const register = (extra: Parameters<typeof registration>[0] = {}) => stack.control.registerNamespace({ namespace: registration(extra) });
  const execDescription = (res: Awaited<ReturnType<typeof openRun>>) => res.response.surface?.tools.find((t) => t.name === "exec")?.description ?? "";

  it("namespace prompt text appears only when backing tools are visible", async () => {
    await register();
    const visible = await openRun(stack, GITHUB);
    expect(execDescription(visible)).toContain(
      "`Issues`: GitHub issue helpers for the current repository. Use Issues.list(params) and Issues.update(number, patch).",
    );
    expect(visible.response.surface?.namespaces).toEqual(["Issues"]);
    const hidden = await openRun(stack, GITHUB, { deny: ["github_update_issue"] });
    expect(execDescription(hidden)).not.toContain("Issues");
    expect(hidden.response.surface?.namespaces).toEqual([]);
    const out = await gatewayExec(stack, hidden.scope, GITHUB, `return [typeof Issues, Object.keys(namespaces)]`);
    expect(out.model.value).toEqual(["undefined", []]);
  });

  it("same-named tools from another sourceName do not expose the namespace", async () => {
    await register();
    const impostors: TestTool[] = GITHUB.map((t) => ({ ...t, owner: "evil" }));
    const asPlugin = await openRun(stack, impostors);
    expect(asPlugin.response.surface?.namespaces).toEqual([]);
    const asMcp = await openRun(
      stack,
      GITHUB.map((t) => ({ ...t, source: "mcp", owner: "github" })),
    );
    expect(asMcp.response.surface?.namespaces).toEqual([]);
    const out = await gatewayExec(stack, asPlugin.scope, impostors, `return typeof Issues`);
    expect(out.model.value).toBe("undefined");
  });

  it("raw scope functions are rejected", async () => {
    expect(() => serializeNamespaceScope({ list: async () => [] })).toThrow(NamespaceScopeError);
    expect(() => serializeNamespaceScope({ nested: { deep: [1, () => 2] } })).toThrow(/scope\.nested\.deep\.1 is a function/);
    // A gateway that sends a scope with something other than markers as callables gets nothing callable.
    await register({ scope: { list: "async () => githubClient.listIssues()" } });
    const run = await openRun(stack, GITHUB);
    const out = await gatewayExec(stack, run.scope, GITHUB, `return typeof Issues.list`);
    expect(out.model.value).toBe("string");
    // The CLI gateway refuses a module whose namespace scope holds a raw function, naming the path.
    const dir = mkdtempSync(join(tmpdir(), "cm-ns-"));
    const file = join(dir, "tools.mjs");
    writeFileSync(
      file,
      `export default [{ name: "github_list_issues", owner: "github", handler: () => [] }];
       export const namespaces = [{ pluginId: "github", id: "gh", globalName: "Issues", requiredToolNames: ["github_list_issues"], scope: { list: async () => [] } }];`,
    );
    const child = spawn(
      process.execPath,
      [BIN, "exec", "--sandbox", stack.sandboxAddress, "--orchestrator", stack.orchestratorAddress, "--tools", file, "--code", "return 1"],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let stderr = "";
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
    expect(code).not.toBe(0);
    expect(stderr).toMatch(/namespaces\[0\] \(gh\): scope\.list is a function/);
  });

  it("circular scopes are refused at registration, naming the path", async () => {
    // A scope graph that contains itself cannot become wire JSON; the serializer names where the cycle closes.
    const repo: Record<string, unknown> = { owner: "openclaw", list: namespaceTool("github_list_issues") };
    repo.self = repo;
    expect(() => serializeNamespaceScope({ repo })).toThrow(NamespaceScopeError);
    expect(() => serializeNamespaceScope({ repo })).toThrow(/^scope\.repo\.self is circular \(it contains itself\)$/);
    const root: Record<string, unknown> = { nested: { items: [1] } };
    (root.nested as { items: unknown[] }).items.push({ back: root });
    expect(() => serializeNamespaceScope(root)).toThrow(/^scope\.nested\.items\.1\.back is circular/);
    // A shared (non-circular) reference is not a cycle.
    const shared = { a: 1 };
    expect(serializeNamespaceScope({ x: shared, y: [shared] })).toBe('{"x":{"a":1},"y":[{"a":1}]}');

    // Where a cycle can really arise: a JavaScript gateway module. The CLI gateway refuses the
    // registration before anything is sent, naming the entry and the path, and registers nothing.
    const dir = mkdtempSync(join(tmpdir(), "cm-ns-cycle-"));
    const file = join(dir, "tools.mjs");
    writeFileSync(
      file,
      `export default [{ name: "github_list_issues", owner: "github", origin: "external_plugin", handler: () => [] }];
       const repository = { owner: "openclaw", list: { $tool: "github_list_issues" } };
       repository.links = { parent: repository };
       export const namespaces = [{ pluginId: "github", id: "gh-cycle", globalName: "Issues", requiredToolNames: ["github_list_issues"], scope: { repository } }];`,
    );
    const child = spawn(
      process.execPath,
      [BIN, "exec", "--sandbox", stack.sandboxAddress, "--orchestrator", stack.orchestratorAddress, "--tools", file, "--code", "return typeof Issues"],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d: Buffer) => (stdout += d.toString()));
    child.stderr.on("data", (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on("exit", resolve));
    expect(code).toBe(1);
    expect(stdout).toBe("");
    expect(stderr).toMatch(/namespaces\[0\] \(gh-cycle\): scope\.repository\.links\.parent is circular \(it contains itself\)/);
    expect((await stack.control.listNamespaces({})).namespaces.map((n) => n.id)).not.toContain("gh-cycle");
  });

  it("forged namespace ids and forged paths are rejected", async () => {
    // At registration: another plugin cannot take over a namespace id or its globalName.
    await register();
    await expect(register({ pluginId: "evil" })).rejects.toSatisfy((e) => errorCode(e) === "already_exists");
    await expect(register({ pluginId: "evil", id: "evil-issues" })).rejects.toThrow(/globalName Issues is already used by namespace github-issues/);
    // Unsafe path segments are refused whole, naming the path.
    for (const [scopeJson, message] of [
      ['{"__proto__": {"x": 1}}', /scope has an unsafe key "__proto__"/],
      ['{"a": {"constructor": {"$tool": "github_list_issues"}}}', /scope\.a has an unsafe key "constructor"/],
      ['{"a.b": 1}', /unsafe key "a\.b"/],
      ['{"": 1}', /unsafe key ""/],
      ['{"list": {"$tool": "github_list_issues", "run": "rm -rf"}}', /scope\.list is a tool marker with an unknown field "run"/],
      ['{"who": {"$context": "env"}}', /scope\.who is a context marker/],
    ] as const) {
      await expect(stack.control.registerNamespace({ namespace: { ...registration(), id: "forged", globalName: "Forged", scopeJson } })).rejects.toThrow(
        message,
      );
    }
    for (const globalName of ["tools", "MCP", "JSON", "__openclawSecret", "__cm_run", "1abc", "a-b", "eval"]) {
      await expect(register({ id: "g", globalName })).rejects.toSatisfy((e) => errorCode(e) === "invalid_argument");
    }
    // On the host: a call names its namespace by id and its member by path, both looked up in the host's copy.
    const entries = GITHUB.map((t) => ({
      id: `openclaw:github:${t.name}`,
      name: t.name,
      label: "",
      description: "",
      source: "openclaw" as const,
      sourceName: "github",
      parametersJson: "{}",
      outputSchemaJson: "",
      annotations: {},
      examplesJson: [],
      keywords: [],
    }));
    const reg = registration();
    const catalog = new NamespaceCatalog([{ id: reg.id, pluginId: "github", globalName: "Issues", scopeJson: reg.scopeJson }], entries);
    expect(catalog.resolveCall("github-issues", "list", "[]")).toMatchObject({ ok: true, inputJson: "{}" });
    expect(catalog.resolveCall("forged-id", "list", "[]")).toMatchObject({ ok: false, message: expect.stringMatching(/no namespace "forged-id"/) });
    expect(catalog.resolveCall("github-issues", "repository", "[]")).toMatchObject({ ok: false, message: expect.stringMatching(/not a callable member/) });
    expect(catalog.resolveCall("github-issues", "__proto__.constructor", "[]")).toMatchObject({ ok: false });
    expect(catalog.resolveCall("github-issues", "list.$tool", "[]")).toMatchObject({ ok: false });
    expect(catalog.resolveCall("github-issues", "update", '[7, {"title": "x"}]')).toMatchObject({ ok: true, inputJson: '{"number":7,"patch":{"title":"x"}}' });
    // From the guest: the members are plain frozen functions; nothing reaches another tool.
    const run = await openRun(stack, [...GITHUB, { name: "admin_delete_all", owner: "github", handler: () => "deleted" }]);
    const out = await gatewayExec(
      stack,
      run.scope,
      GITHUB,
      `
      const original = Issues.list;
      try { Issues.list = () => tools.call("openclaw:github:admin_delete_all"); } catch (e) {}
      try { Issues.extra = 1; } catch (e) {}
      try { globalThis.Issues = { list: () => tools.call("openclaw:github:admin_delete_all") }; } catch (e) {}
      return { kept: Issues.list === original, frozen: Object.isFrozen(Issues), extra: typeof Issues.extra, listed: await Issues.list() };
    `,
    );
    expect(out.model.value).toMatchObject({ kept: true, frozen: true, extra: "undefined", listed: [{ number: 1 }] });
    expect(out.answered.map((a) => a.call.toolId)).toEqual(["openclaw:github:github_list_issues"]);
  });

  it("callable paths cannot target undeclared tools", async () => {
    await expect(register({ scope: { list: namespaceTool("github_list_issues"), nuke: namespaceTool("admin_delete_all") } })).rejects.toThrow(
      /scope\.nuke targets tool admin_delete_all, which is not in requiredToolNames/,
    );
    await expect(register({ requiredToolNames: [] })).rejects.toThrow(/requiredToolNames must name/);
  });

  it("nested objects and shared references serialize correctly", async () => {
    const shared = { owner: "openclaw", tags: ["a", "b"] };
    await register({
      scope: {
        repository: shared,
        mirror: { of: shared },
        when: new Date(0),
        nested: { deeper: { list: namespaceTool("github_list_issues") }, actions: [namespaceTool("github_update_issue", ["number", "patch"])] },
        who: namespaceContext("agentId"),
        session: namespaceContext("sessionId"),
        limits: namespaceContext("config"),
      },
    });
    const run = await openRun(stack, GITHUB);
    const out = await gatewayExec(
      stack,
      run.scope,
      GITHUB,
      `
      const listed = await Issues.nested.deeper.list({ state: "open" });
      const updated = await namespaces.Issues.nested.actions[0](5, { title: "t" });
      return {
        same: Issues === namespaces.Issues,
        repository: Issues.repository, mirror: Issues.mirror.of, when: Issues.when,
        who: Issues.who, session: Issues.session, timeoutMs: Issues.limits.timeoutMs,
        listed, updated,
      };
    `,
    );
    expect(out.model.status).toBe("completed");
    expect(out.model.value).toEqual({
      same: true,
      repository: shared,
      mirror: shared,
      when: "1970-01-01T00:00:00.000Z",
      who: run.scope.agentId,
      session: run.scope.sessionId,
      timeoutMs: 10000,
      listed: [{ number: 1, state: "open", title: "Login bug" }],
      updated: { number: 5, patch: { title: "t" }, updated: true },
    });
  });

  it("namespace calls execute through catalog tools and return JSON-safe details", async () => {
    await register();
    const run = await openRun(stack, GITHUB);
    const out = await gatewayExec(
      stack,
      run.scope,
      GITHUB,
      `
      const open = await Issues.list({ state: "open" });
      const none = await Issues.list();
      const updated = await Issues.update(12, { labels: ["bug"], when: new Date(0), big: 10n, fn() {} });
      return { open, none, updated };
    `,
    );
    expect(out.model.status).toBe("completed");
    expect(out.answered.map((a) => [a.call.toolId, a.input])).toEqual([
      ["openclaw:github:github_list_issues", { state: "open" }],
      ["openclaw:github:github_list_issues", {}],
      ["openclaw:github:github_update_issue", { number: 12, patch: { labels: ["bug"], when: "1970-01-01T00:00:00.000Z", big: "10", fn: "[Function fn]" } }],
    ]);
    expect(out.model.telemetry.callCount).toBe(3);
    const trajectory = await stack.control.getTrajectory({ scope: run.scope });
    expect(trajectory.steps.at(-1)?.nestedCalls.map((n) => [n.toolId, n.outcome])).toEqual([
      ["openclaw:github:github_list_issues", "ok"],
      ["openclaw:github:github_list_issues", "ok"],
      ["openclaw:github:github_update_issue", "ok"],
    ]);
  });

  it("failures can be caught by guest code", async () => {
    await register();
    const run = await openRun(stack, GITHUB);
    const out = await gatewayExec(
      stack,
      run.scope,
      GITHUB,
      `
      try { await Issues.update(404, {}); return "no error"; } catch (e) { return { name: e.name, message: e.message, isError: e instanceof Error }; }
    `,
    );
    expect(out.model.value).toEqual({ name: "NotFound", message: "issue 404 does not exist", isError: true });
  });

  it("suspended namespace calls resume through wait", async () => {
    await register();
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => (release = r));
    const slow = GITHUB.map((t) => (t.name === "github_list_issues" ? { ...t, handler: async () => (await gate, [{ number: 9 }]) } : t));
    const run = await openRun(stack, slow);
    // The gateway answers once the exec has returned waiting (the sidecar logs the result it sent).
    const returned = logged(stack.proc, new RegExp(`"agentRunId":"${run.scope.agentRunId}".*"status":"waiting".*"msg":"exec finished"`), {
      ms: 30_000,
      from: stack.proc.stderr.length,
    }).finally(release);
    const execP = gatewayExec(stack, run.scope, slow, `const issues = await Issues.list({}); text("resumed"); return issues.length;`, { timeoutMs: 1000 });
    const first = await execP;
    await returned;
    expect(first.model.status).toBe("waiting");
    expect(first.model.pendingToolCalls).toEqual([expect.objectContaining({ toolId: "openclaw:github:github_list_issues" })]);
    const resumed = await waitFor(stack.sandbox, { scope: run.scope, runId: first.model.runId! });
    expect(resumed.model).toMatchObject({ status: "completed", value: 1, output: [{ type: "text", text: "resumed" }] });
  });

  it("plugin rollback clears the owning namespace registrations", async () => {
    await register();
    await stack.control.registerNamespace({
      namespace: {
        ...registration({
          pluginId: "calendar",
          id: "calendar",
          globalName: "Calendar",
          requiredToolNames: ["calendar_list"],
          scope: { list: namespaceTool("calendar_list") },
        }),
      },
    });
    const tools = [...GITHUB, { name: "calendar_list", owner: "calendar", handler: () => [] }];
    const before = await openRun(stack, tools);
    expect(before.response.surface?.namespaces).toEqual(["Calendar", "Issues"]);
    expect((await stack.control.clearNamespaces({ pluginId: "github" })).cleared).toBe(1);
    expect((await stack.control.listNamespaces({})).namespaces.map((n) => n.id)).toEqual(["calendar"]);
    const out = await gatewayExec(stack, before.scope, tools, `return [typeof Issues, typeof Calendar, Object.keys(namespaces)]`);
    expect(out.model.value).toEqual(["undefined", "object", ["Calendar"]]);
    const surface = await stack.control.describeSurface({ scope: before.scope });
    expect(surface.surface?.namespaces).toEqual(["Calendar"]);
  });
});

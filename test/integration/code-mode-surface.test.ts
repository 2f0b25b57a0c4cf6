/**
 * The code-mode surface end to end, named after the seed's validation checklist:
 * catalog, policy, search/describe/call, convenience names, shell exec by id, control
 * tools refused, parallel and sequential nested calls through the gateway, tool
 * failures caught by the guest, run isolation, telemetry, trajectory and the
 * model-visible surface.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Refusal } from "../../src/gen/codemode/common/v1/common_pb.js";
import { execute, logged, startStack, type Stack } from "../helpers/harness.js";
import { gatewayExec, openRun, type TestTool } from "../helpers/gateway.js";

let stack: Stack;
beforeAll(async () => {
  stack = await startStack(["--threads", "2"]);
});
afterAll(async () => {
  expect(await stack.stop()).toBe(0);
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const TOOLS: TestTool[] = [
  {
    name: "message",
    description: "Send a chat message to a channel",
    parameters: { type: "object", properties: { channel: { type: "string" }, text: { type: "string" } } },
    handler: (i) => ({ sent: i }),
  },
  {
    name: "exec",
    description: "Run a shell command on the host",
    parameters: { type: "object", properties: { command: { type: "string" } } },
    handler: (i) => ({ shell: (i as { command: string }).command }),
  },
  {
    name: "web_search",
    description: "Search the web for pages",
    parameters: { type: "object", properties: { query: { type: "string" } } },
    handler: (i) => ({ hits: [(i as { query: string }).query] }),
  },
  {
    name: "browser_request",
    owner: "browser",
    origin: "bundled_plugin",
    description: "Fetch a page in the headless browser",
    parameters: { type: "object", properties: { url: { type: "string" } } },
    handler: () => ({ html: "<p/>" }),
  },
  {
    name: "calendar_create",
    owner: "calendar",
    origin: "external_plugin",
    description: "Create a calendar event",
    parameters: { type: "object", properties: { title: { type: "string" }, start: { type: "string" } } },
    handler: (i) => ({ created: i }),
  },
  { name: "create_issue", source: "mcp", owner: "github", description: "Create a GitHub issue" },
  { name: "select_file", source: "client", owner: "app", description: "Ask the user to pick a file", handler: () => ({ path: "/tmp/a.txt" }) },
  { name: "secret_admin", description: "Rotate production secrets", handler: () => ({ rotated: true }) },
  { name: "wait", description: "a control tool that must never enter the catalog" },
  { name: "tool_search", description: "a control tool that must never enter the catalog" },
  {
    name: "fail",
    description: "Always fails",
    handler: () => {
      throw new TypeError("disk on fire");
    },
  },
  {
    name: "slow_echo",
    description: "Echo after a delay",
    parameters: { type: "object", properties: { n: { type: "number" } } },
    handler: async (i) => {
      await sleep(30);
      return i;
    },
  },
];

describe("catalog (seed: tool catalog)", () => {
  it("all effective non-MCP tools appear in ALL_TOOLS, in the seed's order, with seed ids", async () => {
    const { scope } = await openRun(stack, TOOLS, { deny: ["secret_*"] });
    const { model } = await gatewayExec(stack, scope, TOOLS, "return ALL_TOOLS");
    const ids = (model.value as Array<{ id: string }>).map((t) => t.id);
    expect(ids).toEqual([
      "openclaw:core:exec",
      "openclaw:core:fail",
      "openclaw:core:message",
      "openclaw:core:slow_echo",
      "openclaw:core:web_search",
      "openclaw:browser:browser_request",
      "openclaw:calendar:calendar_create",
      "client:app:select_file",
    ]);
    const entry = (model.value as Array<Record<string, unknown>>)[2];
    expect(entry).toEqual({
      id: "openclaw:core:message",
      name: "message",
      description: "Send a chat message to a channel",
      source: "openclaw",
      sourceName: "core",
    });
    expect(model.telemetry).toMatchObject({ catalogSize: 9, sources: { openclaw: 7, mcp: 1, client: 1 } });
  });

  it("denied tools do not appear in ALL_TOOLS and cannot be called by a guessed id", async () => {
    const { scope } = await openRun(stack, TOOLS, { deny: ["secret_*"] });
    const code = `
      const listed = ALL_TOOLS.some((t) => t.name === "secret_admin");
      const found = (await tools.search("rotate production secrets")).length;
      let called = "no error";
      try { await tools.call("openclaw:core:secret_admin", {}); } catch (e) { called = e.name + ": " + e.message; }
      let described = "no error";
      try { await tools.describe("openclaw:core:secret_admin"); } catch (e) { described = e.name; }
      return { listed, found, called, described, conv: typeof tools.secret_admin };`;
    const { model, answered } = await gatewayExec(stack, scope, TOOLS, code);
    expect(model.value).toMatchObject({ listed: false, found: 0, described: "ToolNotFound", conv: "undefined" });
    expect((model.value as { called: string }).called).toMatch(/^ToolNotFound: unknown tool id/);
    expect(answered).toHaveLength(0);
  });

  it("an allow list narrows the catalog; an empty allow list does not activate code mode", async () => {
    const narrowed = await openRun(stack, TOOLS, { allow: ["openclaw:core:m*", "select_file"] });
    expect(narrowed.response.surface?.catalogSize).toBe(2);
    const none = await openRun(stack, TOOLS, { allowNone: true });
    expect(none.response.surface).toMatchObject({ codeModeActive: false, tools: [] });
    expect(none.response.surface?.inactiveReason).toMatch(/no tools are visible/);
    const { model, result } = await execute(stack, { scope: none.scope, code: "return 1" });
    expect(model).toMatchObject({ status: "failed", code: "invalid_input" });
    expect(result.refusal).toBe(Refusal.CODE_MODE_INACTIVE);
  });

  it("Tool Search control tools are hidden from the model surface and the hidden catalog", async () => {
    const { scope, response } = await openRun(stack, TOOLS);
    expect(response.surface?.tools.map((t) => t.name)).toEqual(["exec", "wait"]);
    const { model } = await gatewayExec(
      stack,
      scope,
      TOOLS,
      "return ALL_TOOLS.map((t) => t.name).filter((n) => ['wait','tool_search','tool_search_code','tool_describe','tool_call'].includes(n))",
    );
    expect(model.value).toEqual([]);
  });

  it("ids use the configured core source name", async () => {
    const { scope } = await openRun(stack, TOOLS.slice(0, 1), {}, { config: { coreSourceName: "acme" } });
    const { model } = await gatewayExec(stack, scope, TOOLS, "return ALL_TOOLS[0].id");
    expect(model.value).toBe("acme:core:message");
  });

  it("PutCatalog is content-addressed: the same tools in another order get the same id", async () => {
    const a = await stack.control.putCatalog({
      tools: [
        { name: "a", description: "A" },
        { name: "b", description: "B" },
      ],
    });
    const b = await stack.control.putCatalog({
      tools: [
        { name: "b", description: "B" },
        { name: "a", description: "A" },
      ],
    });
    expect(a.catalogId).toBe(b.catalogId);
    expect(a.catalogId).toMatch(/^sha256:[0-9a-f]{64}$/);
    await expect(stack.control.putCatalog({ tools: [{ name: "bad name!" }] })).rejects.toMatchObject({ code: "invalid_argument" });
  });
});

describe("search, describe, call (seed: guest runtime API)", () => {
  it("tools.search ranks by relevance, honours the default limit and the clamp", async () => {
    const code = `
      const top = await tools.search("calendar event");
      const dflt = await tools.search("e");
      const clamped = await tools.search("a", { limit: 500 });
      const byParam = await tools.search("url");
      return { top: top[0].id, dflt: dflt.length, clamped: clamped.length, byParam: byParam[0].id, hasSchema: "parameters" in top[0] };`;
    // Unclamped first: "a" matches more tools than the clamp below lets through.
    const open = await openRun(stack, TOOLS, {}, { config: { searchDefaultLimit: 2 } });
    const unclamped = await gatewayExec(stack, open.scope, TOOLS, code);
    expect((unclamped.model.value as { clamped: number }).clamped).toBeGreaterThan(3);
    const { scope } = await openRun(stack, TOOLS, {}, { config: { searchDefaultLimit: 2, maxSearchLimit: 3 } });
    const { model } = await gatewayExec(stack, scope, TOOLS, code);
    expect(model.value).toEqual({
      top: "openclaw:calendar:calendar_create",
      dflt: 2,
      clamped: 3,
      byParam: "openclaw:browser:browser_request",
      hasSchema: false,
    });
    expect(model.telemetry).toMatchObject({ searchCount: 4 });
  });

  it("maxSearchLimit caps tools.search whatever limit the program asks for", async () => {
    const reports: TestTool[] = Array.from({ length: 12 }, (_, i) => ({ name: `report_${i}`, description: `Build the quarterly report number ${i}` }));
    const code = `return (await tools.search("quarterly report", { limit: 50 })).map((e) => e.id);`;
    const uncapped = await openRun(stack, reports);
    expect((await gatewayExec(stack, uncapped.scope, reports, code)).model.value).toHaveLength(12);
    const capped = await openRun(stack, reports, {}, { config: { maxSearchLimit: 2 } });
    const { model } = await gatewayExec(stack, capped.scope, reports, code);
    expect(model.status).toBe("completed");
    expect(model.value).toHaveLength(2);
  });

  it("searches, describes and calls a tool in one exec", async () => {
    const { scope } = await openRun(stack, TOOLS);
    const code = `
      const hits = await tools.search("send chat message");
      const d = await tools.describe(hits[0].id);
      const r = await tools.call(d.id, { channel: "#ops", text: "hi" });
      return { id: d.id, params: Object.keys(d.parameters.properties), r };`;
    const { model, answered } = await gatewayExec(stack, scope, TOOLS, code);
    expect(model).toMatchObject({
      status: "completed",
      value: { id: "openclaw:core:message", params: ["channel", "text"], r: { sent: { channel: "#ops", text: "hi" } } },
    });
    expect(answered[0]?.call).toMatchObject({ toolId: "openclaw:core:message", toolName: "message", sourceName: "core" });
    expect(model.telemetry).toMatchObject({ searchCount: 1, describeCount: 1, callCount: 1 });
  });

  it("an unknown id gets did-you-mean suggestions", async () => {
    const { scope } = await openRun(stack, TOOLS);
    const { model } = await gatewayExec(stack, scope, TOOLS, `try { await tools.call("openclaw:core:mesage", {}); } catch (e) { return e.message }`);
    expect(model.value).toMatch(/Did you mean: openclaw:core:message/);
  });

  it("convenience functions exist for unambiguous safe names, never shadow helpers, and are omitted on collision", async () => {
    const colliding: TestTool[] = [
      ...TOOLS,
      { name: "search", description: "a tool named search" },
      { name: "lookup", owner: "one", description: "lookup one" },
      { name: "lookup", owner: "two", description: "lookup two" },
    ];
    const { scope } = await openRun(stack, colliding);
    const code = `return { web: (await tools.web_search({ query: "q" })).hits[0], search: typeof tools.search, lookup: typeof tools.lookup, mcp: typeof tools.create_issue, helper: (await tools.search("lookup")).length > 0 };`;
    const { model } = await gatewayExec(stack, scope, colliding, code);
    expect(model.value).toEqual({ web: "q", search: "function", lookup: "undefined", mcp: "undefined", helper: true });
  });

  it("shell exec is hidden from the model but callable by catalog id when allowed", async () => {
    const { scope, response } = await openRun(stack, TOOLS);
    expect(response.surface?.tools.filter((t) => t.name === "exec")).toHaveLength(1);
    const { model } = await gatewayExec(stack, scope, TOOLS, `return await tools.call("openclaw:core:exec", { command: "ls" })`);
    expect(model.value).toEqual({ shell: "ls" });
  });

  it("recursive code-mode exec and wait are not callable from guest code", async () => {
    const { scope } = await openRun(stack, TOOLS);
    const code = `const out = []; for (const id of ["exec", "wait", "tool_search", "openclaw:core:wait"]) { try { await tools.call(id, {}); out.push("called"); } catch (e) { out.push(e.message); } } return out;`;
    const { model, answered } = await gatewayExec(stack, scope, TOOLS, code);
    const msgs = model.value as string[];
    expect(msgs[0]).toMatch(/control tool.*openclaw:core:exec/);
    expect(msgs[1]).toMatch(/control tool/);
    expect(msgs[2]).toMatch(/control tool/);
    expect(msgs[3]).toMatch(/unknown tool id/);
    expect(answered).toHaveLength(0);
  });

  it("MCP entries are absent from tools.* views", async () => {
    const { scope } = await openRun(stack, TOOLS);
    const code = `let e = ""; try { await tools.call("mcp:github:create_issue", {}); } catch (x) { e = x.message } return { e, listed: ALL_TOOLS.some((t) => t.source === "mcp") };`;
    const { model } = await gatewayExec(stack, scope, TOOLS, code);
    expect(model.value).toMatchObject({ listed: false });
    expect((model.value as { e: string }).e).toMatch(/MCP namespace/);
  });
});

describe("nested tool execution (seed: nested calls through the gateway)", () => {
  it("a guest catches a tool failure as a plain error with no host stack", async () => {
    const { scope } = await openRun(stack, TOOLS);
    const code = `try { await tools.fail({}); return "no"; } catch (e) { return { name: e.name, message: e.message, stack: String(e.stack ?? "") }; }`;
    const { model } = await gatewayExec(stack, scope, TOOLS, code);
    const v = model.value as { name: string; message: string; stack: string };
    expect(v.name).toBe("TypeError");
    expect(v.message).toBe("disk on fire");
    expect(v.stack).not.toMatch(/node_modules|\/work\/|dist\//);
  });

  it("16 parallel calls complete in one exec; one more than maxPendingToolCalls fails cleanly", async () => {
    const { scope } = await openRun(stack, TOOLS);
    const code = `
      const ok = await Promise.all(Array.from({ length: 16 }, (_, n) => tools.slow_echo({ n })));
      const over = Array.from({ length: 17 }, (_, n) => tools.slow_echo({ n }).then(() => "ok", (e) => e.name + ": " + e.message));
      const settled = await Promise.all(over);
      return { ok: ok.map((r) => r.n), failed: settled.filter((s) => s !== "ok") };`;
    const { model, answered } = await gatewayExec(stack, scope, TOOLS, code);
    expect(model.status).toBe("completed");
    const v = model.value as { ok: number[]; failed: string[] };
    expect(v.ok).toEqual(Array.from({ length: 16 }, (_, n) => n));
    expect(v.failed).toEqual(["RangeError: too many pending tool calls (maxPendingToolCalls is 16)."]);
    expect(answered).toHaveLength(32);
  });

  it("a program with 10 sequential calls finishes in one exec with zero waits", async () => {
    const { scope } = await openRun(stack, TOOLS);
    const code = `let total = 0; for (let n = 1; n <= 10; n++) { total += (await tools.slow_echo({ n })).n; text("step " + n); } return total;`;
    const { model } = await gatewayExec(stack, scope, TOOLS, code);
    expect(model).toMatchObject({ status: "completed", value: 55 });
    expect(model.output).toHaveLength(10);
    expect(model.telemetry).toMatchObject({ callCount: 10 });
  });

  it("run isolation: two concurrent runs with different catalogs never see each other's tools", async () => {
    const a: TestTool[] = [{ name: "alpha_only", description: "tool of run A", handler: () => "A" }];
    const b: TestTool[] = [{ name: "beta_only", description: "tool of run B", handler: () => "B" }];
    const [ra, rb] = await Promise.all([openRun(stack, a), openRun(stack, b)]);
    const probe = (other: string) => `
      const names = ALL_TOOLS.map((t) => t.name);
      let cross = "refused"; try { await tools.call("openclaw:core:${other}", {}); cross = "called"; } catch (e) {}
      const mine = await tools.call(ALL_TOOLS[0].id, {});
      return { names, cross, mine };`;
    const [xa, xb] = await Promise.all([gatewayExec(stack, ra.scope, a, probe("beta_only")), gatewayExec(stack, rb.scope, b, probe("alpha_only"))]);
    expect(xa.model.value).toEqual({ names: ["alpha_only"], cross: "refused", mine: "A" });
    expect(xb.model.value).toEqual({ names: ["beta_only"], cross: "refused", mine: "B" });
  });

  it("the trajectory shows nested calls under their parent exec call with outcome and timing", async () => {
    const { scope } = await openRun(stack, TOOLS);
    await gatewayExec(stack, scope, TOOLS, `await tools.message({ text: "x" }); try { await tools.fail({}) } catch {} return 1`);
    const traj = await stack.control.getTrajectory({ scope });
    expect(traj.steps).toHaveLength(1);
    const step = traj.steps[0]!;
    expect(step).toMatchObject({ kind: "exec", status: "completed" });
    expect(step.nestedCalls.map((n) => [n.toolId, n.outcome, n.parentCallId === step.callId])).toEqual([
      ["openclaw:core:message", "ok", true],
      ["openclaw:core:fail", "error", true],
    ]);
    expect(step.nestedCalls[1]?.errorMessage).toBe("disk on fire");
  });

  it("counters are cumulative across the run's execs", async () => {
    const { scope } = await openRun(stack, TOOLS);
    await gatewayExec(stack, scope, TOOLS, `await tools.search("x"); return 1`);
    const { model } = await gatewayExec(stack, scope, TOOLS, `await tools.search("y"); return 1`);
    expect(model.telemetry).toMatchObject({ searchCount: 2 });
  });
});

describe("BridgeCallback under misuse", () => {
  it("another scope's answer for a live call is refused with permission_denied and not delivered; the run's own answer then is", async () => {
    const { scope } = await openRun(stack, TOOLS);
    const intruder = { ...scope, agentRunId: `${scope.agentRunId}-other` };
    /** What BridgeCallback said: its status code, or whether the answer went into a live VM. */
    const said = (p: Promise<{ deliveredLive: boolean }>) =>
      p.then(
        (r) => ({ deliveredLive: r.deliveredLive }),
        (err: { code?: string }) => ({ code: err.code }),
      );
    const replies: Array<Promise<unknown>> = [];
    const out = await execute(stack, { scope, code: `return await tools.message({ channel: "#a", text: "hi" });` }, (call) => {
      // The VM awaits this call while both answers arrive: the other scope's first, then the run's own.
      const answer = (s: typeof scope, value: string) =>
        said(stack.sandbox.bridgeCallback({ scope: s, callId: call.callId, outcome: { case: "resultJson", value } }));
      replies.push((async () => ({ intruder: await answer(intruder, '"from another scope"'), own: await answer(scope, '"from the run"') }))());
    });
    expect(replies).toHaveLength(1);
    expect(await replies[0]).toEqual({ intruder: { code: "permission_denied" }, own: { deliveredLive: true } });
    expect(out.model).toMatchObject({ status: "completed", value: "from the run" });
  });

  it("the test gateway does not swallow a refused answer: the exec's promise fails, or the refusal is returned when asked", async () => {
    // The answer goes once the sidecar logged the exec's end, so it always arrives late.
    let scope!: Awaited<ReturnType<typeof openRun>>["scope"];
    let mark = 0;
    const finished = () => new RegExp(`"agentRunId":"${scope.agentRunId}".*"msg":"exec finished"`);
    const late: TestTool[] = [
      {
        name: "late",
        description: "Answers after the program ended",
        handler: () => logged(stack.proc, finished(), { from: mark }).then(() => "late"),
      },
    ];
    scope = (await openRun(stack, late)).scope;
    const code = `tools.late({}); throw new Error("ended first")`;
    mark = stack.proc.stderr.length;
    await expect(gatewayExec(stack, scope, late, code)).rejects.toThrow(/BridgeCallback refused 1 answer\(s\): late \(c_[\w-]+\): failed_precondition/);
    mark = stack.proc.stderr.length;
    const returned = await gatewayExec(stack, scope, late, code, {}, { refusals: "return" });
    expect(returned.model).toMatchObject({ status: "failed", error: expect.stringMatching(/^Error: ended first/) });
    expect(returned.refused.map((r) => [r.call.toolName, r.code])).toEqual([["late", "failed_precondition"]]);
  });

  it("unknown call id, wrong scope, duplicate answer, answer after the exec ended: clear statuses, nothing crashes", async () => {
    const { scope } = await openRun(stack, TOOLS);
    await expect(stack.sandbox.bridgeCallback({ scope, callId: "c_nope", outcome: { case: "resultJson", value: "1" } })).rejects.toMatchObject({
      code: "not_found",
    });
    await expect(stack.sandbox.bridgeCallback({ scope, callId: "c_x", outcome: { case: "resultJson", value: "{not json" } })).rejects.toMatchObject({
      code: "invalid_argument",
    });
    await expect(stack.sandbox.bridgeCallback({ scope, callId: "c_x" })).rejects.toMatchObject({ code: "invalid_argument" });

    let first: string | undefined;
    const stale: string[] = [];
    // The program fails while web_search is still pending, so its exec ends with the call open.
    const answeredTwice = await execute(
      stack,
      { scope, code: `const a = await tools.message({}); tools.web_search({}).catch(() => 0); throw new Error(a)` },
      (call) => {
        if (call.toolName === "message") {
          first = call.callId;
          void stack.sandbox.bridgeCallback({ scope, callId: call.callId, outcome: { case: "resultJson", value: '"first"' } });
        } else stale.push(call.callId);
      },
    );
    expect(answeredTwice.model).toMatchObject({ status: "failed", error: expect.stringMatching(/^Error: first/) });
    await expect(stack.sandbox.bridgeCallback({ scope, callId: first!, outcome: { case: "resultJson", value: '"again"' } })).rejects.toMatchObject({
      code: "already_exists",
    });
    await expect(
      stack.sandbox.bridgeCallback({ scope: { ...scope, agentRunId: "someone-else" }, callId: stale[0]!, outcome: { case: "resultJson", value: "1" } }),
    ).rejects.toMatchObject({ code: "permission_denied" });
    await expect(stack.sandbox.bridgeCallback({ scope, callId: stale[0]!, outcome: { case: "resultJson", value: "1" } })).rejects.toMatchObject({
      code: "failed_precondition",
    });
    const again = await execute(stack, { code: "return 'still serving'" });
    expect(again.model.value).toBe("still serving");
  });
});

describe("model-visible surface (seed: model-visible tools)", () => {
  it("describes exactly exec and wait with a flat language enum and the serialized size", async () => {
    const { scope } = await openRun(stack, TOOLS);
    const { surface } = await stack.control.describeSurface({ scope });
    expect(surface?.codeModeActive).toBe(true);
    expect(surface?.tools.map((t) => t.name)).toEqual(["exec", "wait"]);
    const execSchema = JSON.parse(surface!.tools[0]!.inputSchemaJson) as { properties: { language: Record<string, unknown> } };
    expect(execSchema.properties.language).toMatchObject({ type: "string", enum: ["javascript", "typescript"] });
    expect(execSchema.properties.language).not.toHaveProperty("oneOf");
    expect(surface?.tools[0]?.description).toMatch(/tools\.search/);
    expect(surface?.serializedBytes).toBe(Buffer.byteLength(surface!.toolsJson));
  });

  it("a run with tools disabled does not activate code mode, and says so", async () => {
    const { response } = await openRun(stack, TOOLS, {}, { disableTools: true });
    expect(response.surface).toMatchObject({ codeModeActive: false, tools: [] });
    expect(response.surface?.inactiveReason).toMatch(/disables tools/);
  });

  it("disabled config leaves direct tool exposure unchanged", async () => {
    const { response } = await openRun(stack, TOOLS.slice(0, 3), {}, { config: { enabled: false } });
    expect(response.surface?.codeModeActive).toBe(false);
    expect(response.surface?.tools.map((t) => t.name)).toEqual(["exec", "message", "web_search"]);
  });
});

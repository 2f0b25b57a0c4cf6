/**
 * Catalogs and open runs kept in Redis (`--store redis://…`): a restarted orchestrator
 * on the same address, and a second orchestrator on the same Redis, resolve a run the
 * gateway opened before with the same catalog version, entries, config, counters and
 * trajectory; concurrent segments from two replicas all count; CloseRun forgets the run
 * everywhere; and a Redis that goes away makes gateway calls UNAVAILABLE, not INTERNAL.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { Control } from "../../src/gen/codemode/orchestrator/v1/control_pb.js";
import { SidecarLink } from "../../src/gen/codemode/orchestrator/v1/link_pb.js";
import { createClient, type ServiceClient } from "../../src/protocol/grpc-client.js";
import { toWireTool } from "../../src/shared/tool-wire.js";
import { openRun, type TestTool } from "../helpers/gateway.js";
import { scope as newScope, spawnCodemode, type Proc } from "../helpers/harness.js";
import { startRedis, type RedisServer } from "../helpers/redis.js";
import { until } from "../helpers/until.js";

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  await redis.stop();
});

const TOOLS: TestTool[] = [
  { name: "message", description: "Send a chat message", parameters: { type: "object", properties: { text: { type: "string" } } } },
  { name: "web_search", description: "Search the web" },
  { name: "secret_admin", description: "Rotate production secrets" },
  { name: "calendar_create", owner: "calendar", origin: "external_plugin", description: "Create a calendar event" },
  { name: "create_issue", source: "mcp", owner: "github", description: "Create a GitHub issue" },
];
const POLICY = { deny: ["secret_*"] };
const CONFIG = { timeoutMs: 4321, searchDefaultLimit: 7 };

type Orchestrator = {
  proc: Proc;
  address: string;
  control: ServiceClient<typeof Control.method>;
  link: ServiceClient<typeof SidecarLink.method>;
  stop(): Promise<number | null>;
};

async function startOrchestrator(store: string, address = "127.0.0.1:0"): Promise<Orchestrator> {
  const proc = await spawnCodemode(["orchestrator", "--orchestrator-address", address, "--link-address", "127.0.0.1:0", "--store", store]);
  const at = proc.ready.orchestrator!;
  const control = createClient(Control, at);
  const link = createClient(SidecarLink, proc.ready.link!);
  return {
    proc,
    address: at,
    control,
    link,
    async stop() {
      control.close();
      link.close();
      return proc.stop();
    },
  };
}

function step(n: number) {
  return {
    kind: n % 2 === 0 ? "exec" : "wait",
    callId: `call-${n}`,
    codeModeRunId: `cm-${n}`,
    status: "completed",
    errorCode: "",
    startedAtMs: BigInt(1_700_000_000_000 + n),
    durationMs: 12.5,
    nestedCalls: [
      {
        callId: `nested-${n}`,
        toolId: "openclaw:core:message",
        toolName: "message",
        outcome: "ok",
        errorMessage: "",
        startedAtMs: BigInt(1_700_000_000_001 + n),
        durationMs: 3.25,
        parentCallId: `call-${n}`,
      },
    ],
  };
}

type Scope = ReturnType<typeof newScope>;

function record(orch: Orchestrator, scope: Scope, n: number, deltas = { searchDelta: 1, describeDelta: 2, callDelta: 3 }) {
  return orch.link.recordSegment({ scope, step: step(n), ...deltas });
}

it("a restarted orchestrator on the same Redis serves the runs and catalogs opened before", async () => {
  const first = await startOrchestrator(redis.url);
  const stored = await first.control.putCatalog({ tools: TOOLS.slice(0, 2).map(toWireTool) });
  const { scope, response: opened } = await openRun(first, TOOLS, POLICY, { config: CONFIG });
  await record(first, scope, 1);
  await record(first, scope, 2, { searchDelta: 4, describeDelta: 0, callDelta: 1 });
  const resolved = await first.link.resolveRun({ scope });
  const trajectory = await first.control.getTrajectory({ scope });
  expect(resolved).toMatchObject({ found: true, entriesIncluded: true, searchCount: 5, describeCount: 2, callCount: 4, codeModeActive: true });
  expect(resolved.entries.map((e) => e.id)).toEqual([
    "openclaw:core:message",
    "openclaw:core:web_search",
    "openclaw:calendar:calendar_create",
    "mcp:github:create_issue",
  ]);
  expect(resolved.config).toMatchObject(CONFIG);
  expect(trajectory.steps.map((s) => s.callId)).toEqual(["call-1", "call-2"]);
  expect(await first.stop()).toBe(0);

  const second = await startOrchestrator(redis.url, first.address);
  try {
    expect(second.address).toBe(first.address);
    expect(await second.link.resolveRun({ scope })).toEqual(resolved);
    expect(await second.link.resolveRun({ scope, knownCatalogVersion: resolved.catalogVersion })).toMatchObject({
      found: true,
      entriesIncluded: false,
      entries: [],
      searchCount: 5,
    });
    expect(await second.control.getTrajectory({ scope })).toEqual(trajectory);
    expect((await second.control.describeSurface({ scope })).surface).toEqual(opened.surface);

    const reopened = await second.control.openRun({ scope: newScope("byid"), catalog: { case: "catalogId", value: stored.catalogId }, config: {} });
    expect(reopened.catalogId).toBe(stored.catalogId);
    expect(reopened.surface?.catalogSize).toBe(2);

    await record(second, scope, 3);
    expect(await second.link.resolveRun({ scope, knownCatalogVersion: resolved.catalogVersion })).toMatchObject({
      searchCount: 6,
      describeCount: 4,
      callCount: 7,
    });
    expect((await second.control.getTrajectory({ scope })).steps.map((s) => s.callId)).toEqual(["call-1", "call-2", "call-3"]);

    await second.control.closeRun({ scope });
    expect(await second.link.resolveRun({ scope })).toMatchObject({ found: false });
    await expect(second.control.getTrajectory({ scope })).rejects.toMatchObject({ code: "not_found" });
    await expect(second.control.describeSurface({ scope })).rejects.toMatchObject({ code: "not_found" });
  } finally {
    expect(await second.stop()).toBe(0);
  }
});

it("two orchestrators on one Redis share runs, and concurrent segments from both all count", async () => {
  const a = await startOrchestrator(redis.url);
  const b = await startOrchestrator(redis.url);
  try {
    const { scope } = await openRun(a, TOOLS, POLICY, { config: CONFIG });
    const onA = await a.link.resolveRun({ scope });
    expect(await b.link.resolveRun({ scope })).toEqual(onA);

    const stored = await b.control.putCatalog({ tools: TOOLS.map(toWireTool) });
    expect((await a.control.openRun({ scope: newScope("byid"), catalog: { case: "catalogId", value: stored.catalogId }, config: {} })).catalogId).toBe(
      stored.catalogId,
    );

    const segments = 1010;
    await Promise.all(Array.from({ length: segments }, (_, i) => record(i % 2 === 0 ? a : b, scope, i)));
    const counted = await b.link.resolveRun({ scope, knownCatalogVersion: onA.catalogVersion });
    expect(counted).toMatchObject({ found: true, searchCount: segments, describeCount: 2 * segments, callCount: 3 * segments });
    const steps = (await a.control.getTrajectory({ scope })).steps;
    expect(steps).toHaveLength(1000);
    expect(new Set(steps.map((s) => s.callId)).size).toBe(1000);

    for (const n of [5000, 5001, 5002]) await record(n % 2 === 0 ? a : b, scope, n);
    const last = (await b.control.getTrajectory({ scope })).steps;
    expect(last).toHaveLength(1000);
    expect(last.slice(-3).map((s) => s.callId)).toEqual(["call-5000", "call-5001", "call-5002"]);

    // Re-opening with another policy changes the view but keeps counters and trajectory.
    await b.control.openRun({ scope, catalog: { case: "tools", value: { tools: TOOLS.map(toWireTool) } }, policy: { allow: ["message"] }, config: CONFIG });
    const reopened = await a.link.resolveRun({ scope, knownCatalogVersion: onA.catalogVersion });
    expect(reopened.catalogVersion).not.toBe(onA.catalogVersion);
    expect(reopened.entries.map((e) => e.id)).toEqual(["openclaw:core:message"]);
    expect(reopened).toMatchObject({ searchCount: segments + 3, callCount: 3 * (segments + 3) });
    expect((await a.control.getTrajectory({ scope })).steps).toEqual(last);

    await b.control.closeRun({ scope });
    expect(await a.link.resolveRun({ scope })).toMatchObject({ found: false });
    // A segment recorded after the run closed brings nothing back.
    await record(a, scope, 6000);
    expect(await b.link.resolveRun({ scope })).toMatchObject({ found: false });
    await expect(b.control.getTrajectory({ scope })).rejects.toMatchObject({ code: "not_found" });
  } finally {
    expect(await a.stop()).toBe(0);
    expect(await b.stop()).toBe(0);
  }
});

it("when Redis goes away, gateway and sidecar calls fail UNAVAILABLE and the outage is logged once", async () => {
  const own = await startRedis();
  const orch = await startOrchestrator(own.url);
  try {
    const { scope } = await openRun(orch, TOOLS, POLICY);
    await own.stop();
    await expect(orch.control.describeSurface({ scope })).rejects.toMatchObject({
      code: "unavailable",
      message: expect.stringContaining("store is unavailable"),
    });
    await expect(orch.link.resolveRun({ scope })).rejects.toMatchObject({ code: "unavailable" });
    await expect(orch.control.closeRun({ scope })).rejects.toMatchObject({ code: "unavailable" });
    // One line when the outage began (with the error and what needed the store), none per failed call.
    const outage = () =>
      orch.proc.stderr
        .map((l) => JSON.parse(l) as { msg: string; err?: unknown; op?: string })
        .filter((l) => l.msg.startsWith("the orchestrator's store cannot be reached"));
    await until(() => outage().length >= 1, "the outage logged", { detail: () => orch.proc.stderr.join("\n") });
    expect(outage()).toHaveLength(1);
    expect(outage()[0]!.err).toBeDefined();
    expect(orch.proc.stderr.some((l) => l.includes('"msg":"store call failed"'))).toBe(false);
    expect(orch.proc.stderr.some((l) => l.includes('"msg":"handler failed"'))).toBe(false);
  } finally {
    expect(await orch.stop()).toBe(0);
    await own.stop();
  }
});

it("namespaces and MCP server metadata live in Redis: every replica installs the same ones, and a clear anywhere clears everywhere", async () => {
  const a = await startOrchestrator(redis.url);
  const b = await startOrchestrator(redis.url);
  try {
    const plugin: TestTool[] = [{ name: "calendar_list", owner: "calendar", origin: "external_plugin", description: "List events" }, ...TOOLS];
    const ns = {
      pluginId: "calendar",
      id: "calendar-ns",
      globalName: "Calendar",
      description: "Events.",
      prompt: "",
      requiredToolNames: ["calendar_list"],
      scopeJson: '{"list":{"$tool":"calendar_list"}}',
    };
    expect(await a.control.registerNamespace({ namespace: ns })).toMatchObject({ callableCount: 1, replaced: false });
    await expect(b.control.registerNamespace({ namespace: { ...ns, id: "other", pluginId: "other" } })).rejects.toMatchObject({ code: "already_exists" });
    expect(await b.control.registerNamespace({ namespace: { ...ns, description: "Calendar events." } })).toMatchObject({ replaced: true });
    const servers = [
      {
        name: "github",
        serverId: "github-mcp",
        title: "GitHub",
        version: "2.0",
        description: "Issues",
        instructions: "Be brief.",
        resources: true,
        prompts: false,
        aliases: ["gh"],
      },
    ];
    const { scope } = await openRun(a, plugin, POLICY, { mcpServers: servers });
    const onB = await b.link.resolveRun({ scope });
    expect(onB.namespaces).toMatchObject([
      { id: "calendar-ns", pluginId: "calendar", globalName: "Calendar", scopeJson: '{"list":{"$tool":"calendar_list"}}' },
    ]);
    expect(onB.mcpServers).toEqual([expect.objectContaining({ ...servers[0] })]);
    expect((await b.control.describeSurface({ scope })).surface?.tools[0]?.description).toContain("`Calendar`: Calendar events.");

    expect((await b.control.clearNamespaces({ pluginId: "calendar" })).cleared).toBe(1);
    const cleared = await a.link.resolveRun({ scope, knownCatalogVersion: onB.catalogVersion });
    expect(cleared.catalogVersion).not.toBe(onB.catalogVersion);
    expect(cleared.namespaces).toEqual([]);
    expect((await a.control.listNamespaces({})).namespaces).toEqual([]);
  } finally {
    expect(await a.stop()).toBe(0);
    expect(await b.stop()).toBe(0);
  }
});

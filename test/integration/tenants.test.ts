/**
 * Tenants (issue 33, item 1) against real processes, with a tenants file naming two tenants,
 * on `codemode start` (state in memory) and on an orchestrator and a sidecar apart on Redis:
 * a gateway's bearer token names its tenant (a missing or unknown one is UNAUTHENTICATED,
 * health stays open); two tenants using the same scope strings share nothing (catalogs, runs,
 * suspended runs, session stores, trajectories); another tenant's catalog id, run id or call
 * id is not found, never PERMISSION_DENIED; one tenant's namespaces are invisible to the
 * other; and on Redis every key a tenant writes starts with its tenant.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { namespaceTool, serializeNamespaceScope } from "../../src/shared/namespace-scope.js";
import { toWireTool, type GatewayTool } from "../../src/shared/tool-wire.js";
import { healthClient } from "../helpers/health-client.js";
import { collectStream, scope as newScope, spawnCodemode, startCluster, waitFor, type ToolCallEvent } from "../helpers/harness.js";
import { startRedis, type RedisServer } from "../helpers/redis.js";
import { outcomeOf, tenantClients, TOKENS, writeTenantsFile, type TenantClients as Clients } from "../helpers/tenants.js";

type Setup = { sandboxAddress: string; orchestratorAddress: string; redis?: Redis; stop(): Promise<unknown> };

const SETUPS: Array<{ name: string; start(file: string): Promise<Setup> }> = [
  {
    name: "codemode start, state in memory",
    async start(file) {
      const proc = await spawnCodemode(["start", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", "127.0.0.1:0", "--tenants-file", file]);
      return {
        sandboxAddress: proc.ready.sandbox!,
        orchestratorAddress: proc.ready.orchestrator!,
        stop: async () => expect(await proc.stop()).toBe(0),
      };
    },
  },
  {
    name: "an orchestrator and a sidecar apart, state in Redis",
    async start(file) {
      const redis: RedisServer = await startRedis();
      const cluster = await startCluster({
        sidecars: 1,
        orchestratorArgs: ["--store", redis.url, "--tenants-file", file],
        sidecarEnv: [{ CODEMODE_TENANTS_FILE: file }],
      });
      const inspect = new Redis(redis.url);
      return {
        sandboxAddress: cluster.sidecars[0]!.address,
        orchestratorAddress: cluster.orchestratorAddress,
        redis: inspect,
        stop: async () => {
          inspect.disconnect();
          expect(await cluster.stop()).toEqual([0, 0]);
          await redis.stop();
        },
      };
    },
  },
];

const ALPHA: GatewayTool = { name: "alpha", description: "acme's tool" };
const BETA: GatewayTool = { name: "beta", description: "globex's tool" };

async function open(c: Clients, scope: ReturnType<typeof newScope>, tools: GatewayTool[], config: Record<string, unknown> = {}) {
  return c.control.openRun({ scope, catalog: { case: "tools", value: { tools: tools.map(toWireTool) } }, config });
}

const exec = (c: Clients, scope: ReturnType<typeof newScope>, code: string, onToolCall?: (call: ToolCallEvent) => void, config: Record<string, unknown> = {}) =>
  collectStream(c.sandbox.exec({ scope, code, config }), onToolCall);

describe.each(SETUPS)("tenants: $name", ({ start }) => {
  let setup: Setup;
  let acme: Clients;
  let globex: Clients;
  beforeAll(async () => {
    setup = await start(writeTenantsFile());
    acme = tenantClients(setup, TOKENS.acme);
    globex = tenantClients(setup, TOKENS.globex);
  });
  afterAll(async () => {
    for (const c of [acme, globex]) c.close();
    await setup.stop();
  });

  it("a gateway's token names its tenant: none or an unknown one is UNAUTHENTICATED, and health stays open", async () => {
    const scope = newScope("auth");
    for (const c of [tenantClients(setup), tenantClients(setup, "not-a-tenants-token")]) {
      expect(await outcomeOf(open(c, scope, [ALPHA]))).toBe("unauthenticated");
      expect(await outcomeOf(exec(c, scope, "return 1"))).toBe("unauthenticated");
      expect(await outcomeOf(c.sandbox.bridgeCallback({ scope, callId: "call-1", outcome: { case: "resultJson", value: "1" } }))).toBe("unauthenticated");
      c.close();
    }
    for (const address of [setup.sandboxAddress, setup.orchestratorAddress]) expect(await healthClient(address).check("")).toBe("SERVING");
    await open(acme, scope, [ALPHA]);
    expect((await exec(acme, scope, "return 1 + 1")).model).toMatchObject({ status: "completed", value: 2 });
  });

  it("two tenants with identical scope strings share no catalog, run, session store, trajectory or suspended run", async () => {
    const scope = newScope("same");
    await open(acme, scope, [ALPHA]);
    await open(globex, scope, [BETA]);
    const names = "/*names*/ return ALL_TOOLS.map((t) => t.name)";
    expect((await exec(acme, scope, names)).model.value).toEqual(["alpha"]);
    expect((await exec(globex, scope, names)).model.value).toEqual(["beta"]);

    // Session stores: the same agent id and session key, two stores.
    await exec(acme, scope, "/*acme*/ await store('k', 'acme'); return 1");
    expect((await exec(globex, scope, "/*globex*/ return typeof (await load('k'))")).model.value).toBe("undefined");
    await exec(globex, scope, "/*globex*/ await store('k', 'globex'); return 1");
    expect((await exec(acme, scope, "/*acme*/ return await load('k')")).model.value).toBe("acme");
    const session = { agentId: scope.agentId, sessionKey: scope.sessionKey };
    expect((await acme.control.getSessionStore(session)).entries.map((e) => e.valueJson)).toEqual(['"acme"']);
    expect((await globex.control.getSessionStore(session)).entries.map((e) => e.valueJson)).toEqual(['"globex"']);

    // Suspended runs: each tenant resumes its own; the other's run id is "unavailable or expired".
    const parked = async (c: Clients, who: string) => {
      const out = await exec(c, scope, `/*${who}*/ await yield_control('pause'); return '${who} resumed'`);
      expect(out.model.status).toBe("waiting");
      return out.model.runId!;
    };
    const acmeRun = await parked(acme, "acme");
    const globexRun = await parked(globex, "globex");
    const stolen = await waitFor(globex.sandbox, { scope, runId: acmeRun });
    expect(stolen.model).toMatchObject({ status: "failed", error: "code mode run is unavailable or expired." });
    expect((await waitFor(acme.sandbox, { scope, runId: acmeRun })).model).toMatchObject({ status: "completed", value: "acme resumed" });

    // Trajectories: each tenant's holds its own steps only.
    const inputs = async (c: Clients) => (await c.control.getTrajectory({ scope })).steps.map((s) => s.input?.text ?? "");
    const acmeSteps = await inputs(acme);
    const globexSteps = await inputs(globex);
    expect(acmeSteps.some((t) => t.includes("/*acme*/"))).toBe(true);
    expect(acmeSteps.some((t) => t.includes("/*globex*/"))).toBe(false);
    expect(globexSteps.some((t) => t.includes("/*globex*/"))).toBe(true);
    expect(globexSteps.some((t) => t.includes("/*acme*/"))).toBe(false);

    // Closing a run closes the tenant's own: globex's parked run goes, acme's run and its parked run stay.
    const acmeAgain = await parked(acme, "acme");
    expect((await globex.control.closeRun({ scope })).suspendedRunsDeleted).toBe(1);
    expect(await outcomeOf(exec(globex, scope, names))).toBe("failed_precondition");
    expect((await exec(acme, scope, names)).model.value).toEqual(["alpha"]);
    expect((await waitFor(acme.sandbox, { scope, runId: acmeAgain })).model).toMatchObject({ status: "completed", value: "acme resumed" });
    expect(globexRun).not.toBe(acmeRun);
  });

  it("another tenant's catalog id, run id and call id are not found, never permission denied", async () => {
    // A catalog id.
    const { catalogId } = await acme.control.putCatalog({ tools: [toWireTool({ name: "gamma" })] });
    const scope = newScope("ids");
    const refused = await outcomeOf(globex.control.openRun({ scope, catalog: { case: "catalogId", value: catalogId } }));
    expect(refused).toBe("not_found");
    await acme.control.openRun({ scope, catalog: { case: "catalogId", value: catalogId } });
    await open(globex, scope, [BETA]);

    // A call id of a live VM: acme's gateway holds the answer until globex tried it.
    const program = "const r = await tools.call(ALL_TOOLS[0].id, {}); return r";
    let crossed = "";
    const live = await exec(acme, scope, program, (call) => {
      void (async () => {
        crossed = await outcomeOf(globex.sandbox.bridgeCallback({ scope, callId: call.callId, outcome: { case: "resultJson", value: '"globex"' } }));
        await acme.sandbox.bridgeCallback({ scope, callId: call.callId, outcome: { case: "resultJson", value: '"acme"' } });
      })();
    });
    expect(crossed).toBe("not_found");
    expect(live.model).toMatchObject({ status: "completed", value: "acme" });

    // A call id of a suspended run: the call is pending when the exec returns waiting.
    const parked = await exec(acme, scope, program, undefined, { timeoutMs: 200 });
    expect(parked.model.status).toBe("waiting");
    const callId = (parked.model.pendingToolCalls as Array<{ id: string }>)[0]!.id;
    expect(await outcomeOf(globex.sandbox.bridgeCallback({ scope, callId, outcome: { case: "resultJson", value: '"globex"' } }))).toBe("not_found");
    // A run id: globex's wait is the seed's "unavailable or expired", and acme's run is intact.
    expect((await waitFor(globex.sandbox, { scope, runId: parked.model.runId! })).model.error).toBe("code mode run is unavailable or expired.");
    expect((await acme.sandbox.bridgeCallback({ scope, callId, outcome: { case: "resultJson", value: '"acme later"' } })).deliveredLive).toBe(false);
    expect((await waitFor(acme.sandbox, { scope, runId: parked.model.runId! })).model).toMatchObject({ status: "completed", value: "acme later" });
  });

  it("one tenant's namespace is invisible to another", async () => {
    const github: GatewayTool[] = [{ name: "github_list_issues", owner: "github", origin: "external_plugin", description: "List issues." }];
    const namespace = {
      pluginId: "github",
      id: "github-issues",
      globalName: "Issues",
      description: "GitHub issue helpers.",
      prompt: "Use Issues.list().",
      requiredToolNames: ["github_list_issues"],
      scopeJson: serializeNamespaceScope({ list: namespaceTool("github_list_issues") }),
    };
    await acme.control.registerNamespace({ namespace });
    try {
      expect((await acme.control.listNamespaces({})).namespaces.map((n) => n.globalName)).toEqual(["Issues"]);
      expect((await globex.control.listNamespaces({})).namespaces).toEqual([]);
      const scope = newScope("ns");
      expect((await open(acme, scope, github)).surface?.namespaces).toEqual(["Issues"]);
      expect((await open(globex, scope, github)).surface?.namespaces).toEqual([]);
      expect((await exec(acme, scope, "return typeof Issues")).model.value).toBe("object");
      expect((await exec(globex, scope, "return typeof Issues")).model.value).toBe("undefined");
      // The same namespace id and globalName are free for globex: registrations are per tenant.
      expect((await globex.control.registerNamespace({ namespace: { ...namespace, pluginId: "other" } })).replaced).toBe(false);
      expect(await globex.control.clearNamespaces({ pluginId: "github" })).toMatchObject({ cleared: 0 });
      expect((await acme.control.listNamespaces({})).namespaces.map((n) => n.pluginId)).toEqual(["github"]);
    } finally {
      await acme.control.clearNamespaces({ pluginId: "github" });
      await globex.control.clearNamespaces({ pluginId: "other" });
    }
  });

  it("on Redis, every key a tenant writes starts with its tenant", async ({ skip }) => {
    if (!setup.redis) return skip();
    const scope = newScope("keys");
    await open(acme, scope, [ALPHA]);
    await open(globex, scope, [BETA]);
    const out = await exec(acme, scope, "await store('k', 1); await yield_control('pause'); return 1");
    expect(out.model.status).toBe("waiting");
    const keys = await setup.redis.keys("codemode:*");
    expect(keys.filter((k) => k.startsWith("codemode:tenant:acme:run:")).length).toBeGreaterThan(0);
    expect(keys.filter((k) => k.startsWith("codemode:tenant:acme:openrun:")).length).toBeGreaterThan(0);
    expect(keys.filter((k) => k.startsWith("codemode:tenant:globex:openrun:")).length).toBeGreaterThan(0);
    expect(keys.filter((k) => k.startsWith("codemode:tenant:acme:session:acme:")).length).toBeGreaterThan(0);
    // Replay records (docs/replay.md) too: nothing of either tenant is kept outside its prefix.
    expect(keys.filter((k) => k.startsWith("codemode:tenant:acme:replay:")).length).toBeGreaterThan(0);
    expect(keys.filter((k) => !k.startsWith("codemode:tenant:acme:") && !k.startsWith("codemode:tenant:globex:"))).toEqual([]);
  });
});

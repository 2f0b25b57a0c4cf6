/**
 * The sidecars' run cache on a shared store: two orchestrators on one Redis, each a real
 * process with a tenants file, sidecar 0 attached to orchestrator 0 and sidecar 1 to
 * orchestrator 1 (each with metrics). A run changed through one orchestrator (OpenRun again,
 * CloseRun, a namespace, counters another sidecar recorded) is seen by the sidecar attached to
 * the other, before the gateway hears back; one tenant's change leaves the other tenant's run
 * with the same scope strings cached; an orchestrator whose subscription dropped has its
 * sidecars re-resolve; and through a Redis outage (stalled, then killed) plain execs of an open
 * run keep completing on both sidecars, with the run as it was, while what must be stored fails
 * UNAVAILABLE, and a change made once Redis is back is seen at once.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Control } from "../../src/gen/codemode/orchestrator/v1/control_pb.js";
import { Sandbox } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { createClient, type ServiceClient } from "../../src/protocol/grpc-client.js";
import { serializeNamespaceScope } from "../../src/shared/namespace-scope.js";
import { toWireTool } from "../../src/shared/tool-wire.js";
import { healthClient } from "../helpers/health-client.js";
import { collectStream, logged, scope as newScope, SHARED_SNAPSHOT_KEY, spawnCodemode, type Proc } from "../helpers/harness.js";
import { sample, scrape } from "../helpers/metrics-scrape.js";
import { startRedis, type RedisServer } from "../helpers/redis.js";
import { TOKENS, writeTenantsFile } from "../helpers/tenants.js";
import { until } from "../helpers/until.js";

type Gateway = { control: ServiceClient<typeof Control.method>[]; sandbox: ServiceClient<typeof Sandbox.method>[] };

let redis: RedisServer;
const orchestrators: Proc[] = [];
const sidecars: Proc[] = [];
let acme: Gateway;
let globex: Gateway;

const SURE = /run cache invalidations reach this orchestrator/;
const UNSURE = /this orchestrator may miss run cache invalidations/;
/** A generous gRPC deadline: a call that hung on the store would end DEADLINE_EXCEEDED and fail the test. */
const noHang = () => ({ signal: AbortSignal.timeout(15_000) });

beforeAll(async () => {
  redis = await startRedis();
  const file = writeTenantsFile();
  for (let i = 0; i < 2; i++)
    orchestrators.push(
      await spawnCodemode([
        "orchestrator",
        "--orchestrator-address",
        "127.0.0.1:0",
        "--link-address",
        "127.0.0.1:0",
        "--store",
        redis.url,
        "--store-timeout-ms",
        "1000",
        "--tenants-file",
        file,
      ]),
    );
  for (let i = 0; i < 2; i++)
    sidecars.push(
      await spawnCodemode(
        [
          "sandbox",
          "--sandbox-address",
          "127.0.0.1:0",
          "--orchestrator-address",
          orchestrators[i]!.ready.link!,
          "--threads",
          "1",
          "--metrics-address",
          "127.0.0.1:0",
        ],
        { CODEMODE_SNAPSHOT_KEY: SHARED_SNAPSHOT_KEY, CODEMODE_TENANTS_FILE: file },
      ),
    );
  const gateway = (token: string): Gateway => ({
    control: orchestrators.map((o) => createClient(Control, o.ready.orchestrator!, {}, { token })),
    sandbox: sidecars.map((s) => createClient(Sandbox, s.ready.sandbox!, {}, { token })),
  });
  acme = gateway(TOKENS.acme);
  globex = gateway(TOKENS.globex);
  // Both hear invalidations (and so offer caching) before a test changes a run.
  for (const o of orchestrators) await logged(o, SURE);
}, 120_000);

afterAll(async () => {
  for (const g of [acme, globex]) for (const c of [...(g?.control ?? []), ...(g?.sandbox ?? [])]) c.close();
  for (const s of sidecars) expect(await s.stop()).toBe(0);
  for (const o of orchestrators) expect(await o.stop()).toBe(0);
  await redis?.stop();
});

async function lookups(i: number): Promise<{ hit: number; miss: number }> {
  const text = await scrape(sidecars[i]!.ready.metrics!);
  return {
    hit: sample(text, "codemode_run_cache_lookups_total", { result: "hit" }),
    miss: sample(text, "codemode_run_cache_lookups_total", { result: "miss" }),
  };
}

const tool = (name: string, owner?: string) =>
  toWireTool({ name, description: `the ${name} tool`, parameters: { type: "object" }, ...(owner ? { owner } : {}) });

/** Opens (or opens again) `scope` through orchestrator `via`, with tools named `names`. */
function open(g: Gateway, via: number, scope: ReturnType<typeof newScope>, names: string[], config: Record<string, unknown> = {}) {
  return g.control[via]!.openRun({ scope, catalog: { case: "tools", value: { tools: names.map((n) => tool(n)) } }, config }, noHang());
}

/** Runs `code` on sidecar `on`, answering every nested call with its input. */
function run(g: Gateway, on: number, scope: ReturnType<typeof newScope>, code: string) {
  const s = g.sandbox[on]!;
  return collectStream(
    s.exec({ scope, code }, noHang()),
    (call) => void s.bridgeCallback({ scope, callId: call.callId, outcome: { case: "resultJson", value: call.inputJson } }).catch(() => undefined),
  );
}

const NAMES = `return ALL_TOOLS.map((t) => t.name).join(",")`;

describe("the run cache with two orchestrators on one Redis", () => {
  it("caches runs, and sees OpenRun again and CloseRun through either orchestrator at once on both sidecars", async () => {
    const scope = newScope("replicas");
    await open(acme, 0, scope, ["alpha"]);
    expect((await run(acme, 1, scope, NAMES)).model.value).toBe("alpha");
    const before = await lookups(1);
    expect((await run(acme, 1, scope, NAMES)).model.value).toBe("alpha");
    expect((await lookups(1)).hit - before.hit).toBe(1);
    expect((await run(acme, 0, scope, NAMES)).model.value).toBe("alpha");

    // Both sidecars hold it: a new opening through either orchestrator reaches both before it returns.
    await open(acme, 0, scope, ["beta"]);
    expect((await run(acme, 1, scope, NAMES)).model.value).toBe("beta");
    expect((await run(acme, 0, scope, NAMES)).model.value).toBe("beta");
    await open(acme, 1, scope, ["gamma"]);
    expect((await run(acme, 0, scope, NAMES)).model.value).toBe("gamma");
    expect((await run(acme, 1, scope, NAMES)).model.value).toBe("gamma");

    await acme.control[0]!.closeRun({ scope });
    await expect(run(acme, 1, scope, "return 1")).rejects.toMatchObject({ code: "failed_precondition" });
    await expect(run(acme, 0, scope, "return 1")).rejects.toMatchObject({ code: "failed_precondition" });
  });

  it("a tenant's change leaves the other tenant's run with the same scope strings cached", async () => {
    const scope = newScope("tenant-cache");
    await open(acme, 0, scope, ["alpha"]);
    await open(globex, 0, scope, ["beta"]);
    expect((await run(acme, 1, scope, NAMES)).model.value).toBe("alpha");
    expect((await run(globex, 1, scope, NAMES)).model.value).toBe("beta");
    await acme.control[0]!.closeRun({ scope });
    const before = await lookups(1);
    expect((await run(globex, 1, scope, NAMES)).model.value).toBe("beta");
    expect((await lookups(1)).hit - before.hit).toBe(1);
    await expect(run(acme, 1, scope, "return 1")).rejects.toMatchObject({ code: "failed_precondition" });
  });

  it("sees a namespace registered through one orchestrator, and cleared through the other", async () => {
    const scope = newScope("replicas-ns");
    await acme.control[0]!.openRun({ scope, catalog: { case: "tools", value: { tools: [tool("cache_lookup", "replica-test")] } } });
    const probe = `return typeof globalThis.ReplicaNs`;
    expect((await run(acme, 1, scope, probe)).model.value).toBe("undefined");
    expect((await run(acme, 0, scope, probe)).model.value).toBe("undefined");
    await acme.control[0]!.registerNamespace({
      namespace: {
        id: "replica-ns",
        pluginId: "replica-test",
        globalName: "ReplicaNs",
        description: "replica test",
        prompt: "ReplicaNs.answer",
        requiredToolNames: ["cache_lookup"],
        scopeJson: serializeNamespaceScope({ answer: 42 }),
      },
    });
    try {
      expect((await run(acme, 1, scope, `return ReplicaNs.answer`)).model.value).toBe(42);
      expect((await run(acme, 0, scope, `return ReplicaNs.answer`)).model.value).toBe(42);
    } finally {
      await acme.control[1]!.clearNamespaces({ pluginId: "replica-test" });
    }
    expect((await run(acme, 0, scope, probe)).model.value).toBe("undefined");
    expect((await run(acme, 1, scope, probe)).model.value).toBe("undefined");
  });

  it("keeps the per-run call cap across orchestrators: counters recorded through one reach the other's sidecar", async () => {
    const scope = newScope("replicas-cap");
    await open(acme, 0, scope, ["echo"], { maxToolCallsPerRun: 3 });
    // Sidecar 1 caches the run with no calls counted.
    expect((await run(acme, 1, scope, "return 0")).model.value).toBe(0);
    const two = `const a = await tools.echo({ n: 1 }); const b = await tools.echo({ n: 2 }); return a.n + b.n`;
    expect((await run(acme, 0, scope, two)).model.value).toBe(3);
    // The record leaves sidecar 0 after its result, and its invalidation crosses Redis without
    // waiting: sidecar 1 resolves the run again once it arrives.
    await until(async () => (await acme.control[1]!.getTrajectory({ scope })).steps.some((s) => s.nestedCalls.length === 2), "the segment to be recorded");
    await until(async () => {
      const before = await lookups(1);
      await run(acme, 1, scope, "return 0");
      return (await lookups(1)).miss > before.miss;
    }, "sidecar 1 to resolve the run again");
    const capped = await run(
      acme,
      1,
      scope,
      `await tools.echo({ n: 1 }); try { await tools.echo({ n: 2 }); return "not capped"; } catch (e) { return e.message; }`,
    );
    expect(capped.model.value).toMatch(/made 3 tool calls, its limit \(maxToolCallsPerRun\)/);
  });

  it("an orchestrator whose subscription dropped has its sidecars re-resolve, and hears changes again once back", async () => {
    const scope = newScope("resubscribe");
    await open(acme, 0, scope, ["alpha"]);
    for (const i of [0, 1]) expect((await run(acme, i, scope, NAMES)).model.value).toBe("alpha");
    const from = orchestrators.map((o) => o.stderr.length);
    const admin = new Redis(redis.url);
    try {
      expect(await admin.client("KILL", "TYPE", "pubsub")).toBeGreaterThanOrEqual(2);
    } finally {
      admin.disconnect();
    }
    for (const [i, o] of orchestrators.entries()) {
      await logged(o, UNSURE, { from: from[i]! });
      await logged(o, SURE, { from: from[i]! });
    }
    for (const i of [0, 1]) {
      const before = await lookups(i);
      expect((await run(acme, i, scope, NAMES)).model.value).toBe("alpha");
      expect((await lookups(i)).miss - before.miss).toBe(1);
    }
    await open(acme, 1, scope, ["beta"]);
    expect((await run(acme, 0, scope, NAMES)).model.value).toBe("beta");
    await acme.control[1]!.closeRun({ scope });
    await expect(run(acme, 0, scope, "return 1")).rejects.toMatchObject({ code: "failed_precondition" });
  });

  it("through a Redis outage, plain execs keep completing on both sidecars while what must be stored fails UNAVAILABLE", async () => {
    const scope = newScope("replicas-outage");
    await open(acme, 0, scope, ["slow"], { timeoutMs: 300 });
    for (const i of [0, 1]) expect((await run(acme, i, scope, NAMES)).model.value).toBe("slow");
    const health = orchestrators.map((o) => healthClient(o.ready.orchestrator!));
    const start = orchestrators.map((o) => o.stderr.length);
    const expected = { stall: "slow", kill: "fresh" };

    for (const outage of ["stall", "kill"] as const) {
      const mark = orchestrators.map((o) => o.stderr.length);
      if (outage === "stall") redis.pause();
      else await redis.stop();
      const plainExecs = async () => {
        for (const i of [0, 1]) expect((await run(acme, i, scope, NAMES)).model).toMatchObject({ status: "completed", value: expected[outage] });
      };
      // From the cache at once; later (the orchestrators stopped trusting it) from what it held.
      // What must be stored fails: a suspension, a session-store write, a gateway's change.
      await plainExecs();
      for (const i of [0, 1]) {
        const parks = await collectStream(acme.sandbox[i]!.exec({ scope, code: "return await tools.call(ALL_TOOLS[0].id, {})" }, noHang()));
        expect(parks.model).toMatchObject({
          status: "failed",
          code: "runtime_unavailable",
          error: "code mode could not store the suspended run: the orchestrator's store cannot be reached.",
        });
      }
      const writes = await collectStream(acme.sandbox[0]!.exec({ scope, code: `await store("k", 1); return 1` }, noHang()));
      expect(writes.model).toMatchObject({ status: "failed", error: expect.stringContaining("the session store cannot be reached") });
      for (const via of [0, 1]) await expect(open(acme, via, scope, ["other"])).rejects.toMatchObject({ code: "unavailable" });
      for (const h of health) await h.until("", "NOT_SERVING");
      for (const [i, o] of orchestrators.entries()) await logged(o, UNSURE, { from: mark[i]! });
      await plainExecs();

      if (outage === "stall") redis.resume();
      else await redis.restart();
      for (const h of health) await h.until("", "SERVING");
      for (const [i, o] of orchestrators.entries()) await logged(o, SURE, { from: mark[i]! });
      if (outage === "stall") {
        // A change once Redis is back, through one orchestrator, reaches the other's sidecar at once.
        await open(acme, 0, scope, ["fresh"], { timeoutMs: 300 });
        for (const i of [1, 0]) expect((await run(acme, i, scope, NAMES)).model.value).toBe("fresh");
      }
    }
    // Redis came back empty: the run is gone, on both sidecars.
    for (const i of [0, 1]) await expect(run(acme, i, scope, "return 3")).rejects.toMatchObject({ code: "failed_precondition" });
    for (const [i, o] of orchestrators.entries()) expect(o.stderr.slice(start[i]).some((l) => l.includes("no run is open"))).toBe(false);
  });
});

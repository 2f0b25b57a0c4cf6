/**
 * A namespace change drops only its tenant's cached runs, through real processes with a
 * tenants file (acme and globex): one orchestrator on the in-memory store with two sidecars,
 * and two orchestrators on one Redis with a sidecar attached to each (the change made through
 * one reaches the other's sidecar over the run-cache bus). Both tenants' runs, with the same
 * scope strings, are cached on every sidecar; acme registers a namespace, then clears it: on
 * every sidecar globex's next exec is a cache hit (`codemode_run_cache_lookups_total`), while
 * acme's resolves again and sees the change.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Control } from "../../src/gen/codemode/orchestrator/v1/control_pb.js";
import { Sandbox } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { createClient, type ServiceClient } from "../../src/protocol/grpc-client.js";
import { serializeNamespaceScope } from "../../src/shared/namespace-scope.js";
import { toWireTool } from "../../src/shared/tool-wire.js";
import { collectStream, logged, scope as newScope, SHARED_SNAPSHOT_KEY, spawnCodemode, type Proc } from "../helpers/harness.js";
import { sample, scrape } from "../helpers/metrics-scrape.js";
import { startRedis, type RedisServer } from "../helpers/redis.js";
import { TOKENS, writeTenantsFile } from "../helpers/tenants.js";

type Gateway = { control: ServiceClient<typeof Control.method>[]; sandbox: ServiceClient<typeof Sandbox.method>[] };
type Cluster = { orchestrators: Proc[]; sidecars: Proc[]; redis?: RedisServer };

const SURE = /run cache invalidations reach this orchestrator/;
/** A generous gRPC deadline: a call that hung would end DEADLINE_EXCEEDED and fail the test. */
const noHang = () => ({ signal: AbortSignal.timeout(15_000) });

const sidecarArgs = (link: string) => [
  "sandbox",
  "--sandbox-address",
  "127.0.0.1:0",
  "--orchestrator-address",
  link,
  "--threads",
  "1",
  "--metrics-address",
  "127.0.0.1:0",
];
const orchestratorArgs = (file: string, extra: string[] = []) => [
  "orchestrator",
  "--orchestrator-address",
  "127.0.0.1:0",
  "--link-address",
  "127.0.0.1:0",
  "--tenants-file",
  file,
  ...extra,
];

const SETUPS: Array<{ name: string; start(file: string): Promise<Cluster> }> = [
  {
    name: "one orchestrator in memory, two sidecars",
    async start(file) {
      const orchestrator = await spawnCodemode(orchestratorArgs(file));
      const sidecars: Proc[] = [];
      for (let i = 0; i < 2; i++) sidecars.push(await spawnCodemode(sidecarArgs(orchestrator.ready.link!), { CODEMODE_TENANTS_FILE: file }));
      return { orchestrators: [orchestrator], sidecars };
    },
  },
  {
    name: "two orchestrators on one Redis, a sidecar attached to each",
    async start(file) {
      const redis = await startRedis();
      const orchestrators: Proc[] = [];
      for (let i = 0; i < 2; i++) orchestrators.push(await spawnCodemode(orchestratorArgs(file, ["--store", redis.url, "--store-timeout-ms", "1000"])));
      const sidecars: Proc[] = [];
      for (const o of orchestrators)
        sidecars.push(await spawnCodemode(sidecarArgs(o.ready.link!), { CODEMODE_SNAPSHOT_KEY: SHARED_SNAPSHOT_KEY, CODEMODE_TENANTS_FILE: file }));
      // Both hear invalidations (and so offer caching) before the test changes anything.
      for (const o of orchestrators) await logged(o, SURE);
      return { orchestrators, sidecars, redis };
    },
  },
];

const OWNER = "tenant-cache-test";
const PROBE = `return typeof globalThis.TenantNs`;

describe.each(SETUPS)("a namespace change with tenants: $name", ({ start }) => {
  let cluster: Cluster;
  let acme: Gateway;
  let globex: Gateway;

  beforeAll(async () => {
    cluster = await start(writeTenantsFile());
    const gateway = (token: string): Gateway => ({
      control: cluster.orchestrators.map((o) => createClient(Control, o.ready.orchestrator!, {}, { token })),
      sandbox: cluster.sidecars.map((s) => createClient(Sandbox, s.ready.sandbox!, {}, { token })),
    });
    acme = gateway(TOKENS.acme);
    globex = gateway(TOKENS.globex);
  }, 120_000);

  afterAll(async () => {
    for (const g of [acme, globex]) for (const c of [...(g?.control ?? []), ...(g?.sandbox ?? [])]) c.close();
    for (const s of cluster?.sidecars ?? []) expect(await s.stop()).toBe(0);
    for (const o of cluster?.orchestrators ?? []) expect(await o.stop()).toBe(0);
    await cluster?.redis?.stop();
  });

  async function lookups(i: number): Promise<{ hit: number; miss: number }> {
    const text = await scrape(cluster.sidecars[i]!.ready.metrics!);
    return {
      hit: sample(text, "codemode_run_cache_lookups_total", { result: "hit" }),
      miss: sample(text, "codemode_run_cache_lookups_total", { result: "miss" }),
    };
  }

  /** Runs `code` on sidecar `on`, and how its run was looked up there (the change in hits and misses). */
  async function run(g: Gateway, on: number, scope: ReturnType<typeof newScope>, code: string) {
    const before = await lookups(on);
    const outcome = await collectStream(g.sandbox[on]!.exec({ scope, code }, noHang()));
    const after = await lookups(on);
    return { value: outcome.model.value, status: outcome.model.status, hits: after.hit - before.hit, misses: after.miss - before.miss };
  }

  /** The exec of each tenant's run on every sidecar (its own run there), after a change acme made. */
  async function afterAcmeChanged(scopes: Array<ReturnType<typeof newScope>>, acmeCode: string, acmeSees: unknown) {
    for (const [i, scope] of scopes.entries()) {
      // globex's run was not dropped: served from the cache, without a resolve.
      expect(await run(globex, i, scope, PROBE)).toEqual({ value: "undefined", status: "completed", hits: 1, misses: 0 });
      // acme's was: it resolves again, and sees the change.
      expect(await run(acme, i, scope, acmeCode)).toEqual({ value: acmeSees, status: "completed", hits: 0, misses: 1 });
      expect(await run(acme, i, scope, acmeCode)).toMatchObject({ hits: 1, misses: 0 });
    }
  }

  it("drops only the registering tenant's cached runs, on every sidecar", async () => {
    // A run per sidecar (a segment one sidecar records drops the run from the others' caches,
    // as its counters moved), each with the same scope strings and the same tool for both
    // tenants: only the tenant tells them apart.
    const scopes = cluster.sidecars.map(() => newScope("tenant-ns"));
    const tools = [toWireTool({ name: "cache_lookup", owner: OWNER, description: "looks up", parameters: { type: "object" } })];
    for (const scope of scopes) for (const g of [acme, globex]) await g.control[0]!.openRun({ scope, catalog: { case: "tools", value: { tools } } }, noHang());
    for (const [i, scope] of scopes.entries())
      for (const g of [acme, globex]) {
        expect((await run(g, i, scope, PROBE)).value).toBe("undefined");
        expect(await run(g, i, scope, PROBE)).toMatchObject({ hits: 1, misses: 0 });
      }

    await acme.control[0]!.registerNamespace(
      {
        namespace: {
          id: "tenant-ns",
          pluginId: OWNER,
          globalName: "TenantNs",
          description: "tenant cache test",
          prompt: "TenantNs.answer",
          requiredToolNames: ["cache_lookup"],
          scopeJson: serializeNamespaceScope({ answer: 42 }),
        },
      },
      noHang(),
    );
    await afterAcmeChanged(scopes, `return TenantNs.answer`, 42);

    // Cleared through the last orchestrator (the other one, on Redis).
    expect((await acme.control.at(-1)!.clearNamespaces({ pluginId: OWNER }, noHang())).cleared).toBe(1);
    await afterAcmeChanged(scopes, PROBE, "undefined");
  });
});

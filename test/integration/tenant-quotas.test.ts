/**
 * Quotas per tenant (issue 33, item 2) against real processes: `codemode start` with a
 * tenants file whose tenant acme has quotas and globex none. Past each quota acme is
 * refused, the refusal naming the quota and when to retry (RESOURCE_EXHAUSTED before
 * anything runs for the sidecar's own quotas, maxConcurrentExecs and execsPerSecond; a
 * `failed` result naming it for the store's, maxSuspendedRuns, maxSuspendedBytes and
 * maxStoreBytes, whose exec already ran), while globex keeps running; the refusals and
 * what each tenant holds are in the metrics, labelled by tenant.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toWireTool } from "../../src/shared/tool-wire.js";
import { collectStream, scope as newScope, spawnCodemode, waitFor, type Proc, type ToolCallEvent } from "../helpers/harness.js";
import { sample, scrape } from "../helpers/metrics-scrape.js";
import { tenantClients, TOKENS, writeTenantsFile, type TenantClients } from "../helpers/tenants.js";
import { until } from "../helpers/until.js";

type Started = { proc: Proc; acme: TenantClients; globex: TenantClients; stop(): Promise<void> };

async function start(quotas: Record<string, number>): Promise<Started> {
  const file = writeTenantsFile({ acme: quotas });
  const proc = await spawnCodemode([
    "start",
    "--sandbox-address",
    "127.0.0.1:0",
    "--orchestrator-address",
    "127.0.0.1:0",
    "--metrics-address",
    "127.0.0.1:0",
    "--tenants-file",
    file,
  ]);
  const addresses = { sandboxAddress: proc.ready.sandbox!, orchestratorAddress: proc.ready.orchestrator! };
  const acme = tenantClients(addresses, TOKENS.acme);
  const globex = tenantClients(addresses, TOKENS.globex);
  return {
    proc,
    acme,
    globex,
    async stop() {
      acme.close();
      globex.close();
      expect(await proc.stop()).toBe(0);
    },
  };
}

async function opened(c: TenantClients, prefix: string) {
  const scope = newScope(prefix);
  await c.control.openRun({ scope, catalog: { case: "tools", value: { tools: [toWireTool({ name: "slow" })] } } });
  return scope;
}

const exec = (c: TenantClients, scope: ReturnType<typeof newScope>, code: string, onToolCall?: (call: ToolCallEvent) => void) =>
  collectStream(c.sandbox.exec({ scope, code }), onToolCall);

/** `call`'s outcome once acme's rate lets it in (it is tried again while RESOURCE_EXHAUSTED). */
function admitted<T>(call: () => Promise<T>): Promise<T> {
  return until(
    async () => {
      try {
        return await call();
      } catch (err) {
        if ((err as { code?: string }).code === "resource_exhausted") return undefined;
        throw err;
      }
    },
    "acme's execsPerSecond bucket to refill",
    { everyMs: 100 },
  );
}

/** The gRPC error a call failed with (its code and message). */
async function failure(p: Promise<unknown>): Promise<{ code: string; message: string }> {
  try {
    await p;
  } catch (err) {
    return { code: (err as { code?: string }).code ?? "", message: (err as Error).message };
  }
  throw new Error("the call did not fail");
}

describe("quotas per tenant: acme limited, globex not", () => {
  let s: Started;
  beforeAll(async () => {
    s = await start({ maxConcurrentExecs: 1, maxSuspendedRuns: 1, maxStoreBytes: 200 });
  });
  afterAll(async () => {
    await s.stop();
  });

  it("maxConcurrentExecs: a second exec in flight is RESOURCE_EXHAUSTED, naming the quota and when to retry; globex runs meanwhile", async () => {
    const scope = await opened(s.acme, "conc");
    let answer!: () => void;
    const held = new Promise<void>((resolve) => (answer = resolve));
    let called!: () => void;
    const running = new Promise<void>((resolve) => (called = resolve));
    // The first exec holds acme's one slot while its tool call waits for the gateway.
    const first = exec(s.acme, scope, "return await tools.call(ALL_TOOLS[0].id, {})", (call) => {
      called();
      void held.then(() => s.acme.sandbox.bridgeCallback({ scope, callId: call.callId, outcome: { case: "resultJson", value: '"done"' } }));
    });
    await running;
    const seen = await failure(exec(s.acme, scope, "return 2"));
    expect(seen.code).toBe("resource_exhausted");
    expect(seen.message).toMatch(
      /tenant "acme" has 1 execs and waits in flight on this sidecar, its quota maxConcurrentExecs \(1\); retry when one of them ends/,
    );
    // globex is not limited by acme's quota: two of its execs run at once.
    const g = await opened(s.globex, "conc-g");
    const both = await Promise.all([exec(s.globex, g, "return 'g1'"), exec(s.globex, g, "return 'g2'")]);
    expect(both.map((o) => o.model.value)).toEqual(["g1", "g2"]);
    answer();
    expect((await first).model).toMatchObject({ status: "completed", value: "done" });
    expect((await exec(s.acme, scope, "return 3")).model.value).toBe(3);
    const metrics = await scrape(s.proc.ready.metrics!);
    expect(sample(metrics, "codemode_tenant_quota_refusals_total", { tenant: "acme", quota: "maxConcurrentExecs" })).toBeGreaterThanOrEqual(1);
    expect(sample(metrics, "codemode_tenant_quota_refusals_total", { tenant: "globex" })).toBe(0);
    expect(sample(metrics, "codemode_tenant_segments_total", { tenant: "globex", kind: "exec", status: "completed" })).toBeGreaterThanOrEqual(2);
  });

  it("maxSuspendedRuns: a suspension past it fails naming the quota and when to retry; globex parks more", async () => {
    const scope = await opened(s.acme, "parked");
    const park = (c: TenantClients, sc: ReturnType<typeof newScope>) => exec(c, sc, "await yield_control('pause'); return 'resumed'");
    const one = await park(s.acme, scope);
    expect(one.model.status).toBe("waiting");
    const two = await park(s.acme, scope);
    expect(two.model).toMatchObject({ status: "failed", code: "runtime_unavailable" });
    expect(two.model.error).toMatch(
      /^code mode run could not be suspended: it would put tenant "acme" over its quota maxSuspendedRuns \(1 suspended runs\); retry after one of its suspended runs ends \(a wait that settles it, or CloseRun\), at the latest in \d+ s when the next one expires\.$/,
    );
    const g = await opened(s.globex, "parked-g");
    for (let i = 0; i < 3; i++) expect((await park(s.globex, g)).model.status).toBe("waiting");
    // Once acme's run settles, acme may park again.
    expect((await waitFor(s.acme.sandbox, { scope, runId: one.model.runId! })).model).toMatchObject({ status: "completed", value: "resumed" });
    expect((await park(s.acme, scope)).model.status).toBe("waiting");
    const metrics = await scrape(s.proc.ready.metrics!);
    expect(sample(metrics, "codemode_tenant_store_quota_refusals_total", { tenant: "acme", quota: "maxSuspendedRuns" })).toBe(1);
    expect(sample(metrics, "codemode_tenant_suspended_runs", { tenant: "acme" })).toBe(1);
    expect(sample(metrics, "codemode_tenant_suspended_runs", { tenant: "globex" })).toBe(3);
    expect(sample(metrics, "codemode_tenant_suspended_bytes", { tenant: "globex" })).toBeGreaterThan(0);
    await s.acme.control.closeRun({ scope });
    await s.globex.control.closeRun({ scope: g });
  });

  it("maxStoreBytes: a commit that puts acme's session stores together past it fails naming the quota; globex stores more", async () => {
    const big = "await store('k', 'x'.repeat(100)); return 'stored'";
    const first = await opened(s.acme, "store-1");
    expect((await exec(s.acme, first, big)).model).toMatchObject({ status: "completed", value: "stored" });
    // Another session of acme: its own store, but the tenant's bytes add up.
    const second = await opened(s.acme, "store-2");
    const refused = await exec(s.acme, second, big);
    expect(refused.model.status).toBe("failed");
    expect(refused.model.error).toMatch(
      /tenant "acme"'s session stores would hold 206 bytes, going over its quota maxStoreBytes \(200 bytes\); retry once one of its session stores is cleared \(ClearSessionStore\) or expires/,
    );
    for (const prefix of ["store-g1", "store-g2", "store-g3"]) {
      const g = await opened(s.globex, prefix);
      expect((await exec(s.globex, g, big)).model.status).toBe("completed");
    }
    // Clearing acme's first session frees its bytes.
    expect((await s.acme.control.clearSessionStore({ agentId: first.agentId, sessionKey: first.sessionKey })).keysDeleted).toBe(1);
    expect((await exec(s.acme, second, big)).model).toMatchObject({ status: "completed", value: "stored" });
    const metrics = await scrape(s.proc.ready.metrics!);
    expect(sample(metrics, "codemode_tenant_store_quota_refusals_total", { tenant: "acme", quota: "maxStoreBytes" })).toBe(1);
    expect(sample(metrics, "codemode_tenant_session_store_bytes", { tenant: "acme" })).toBe(103);
    expect(sample(metrics, "codemode_tenant_session_store_bytes", { tenant: "globex" })).toBe(309);
  });
});

describe("quotas per tenant: execsPerSecond and maxSuspendedBytes", () => {
  let s: Started;
  beforeAll(async () => {
    s = await start({ execsPerSecond: 1, maxSuspendedBytes: 1000 });
  });
  afterAll(async () => {
    await s.stop();
  });

  it("execsPerSecond: an exec past the rate is RESOURCE_EXHAUSTED with when to retry; globex is not limited", async () => {
    const scope = await opened(s.acme, "rate");
    expect((await exec(s.acme, scope, "return 1")).model.value).toBe(1);
    const refused = await failure(exec(s.acme, scope, "return 2"));
    expect(refused.code).toBe("resource_exhausted");
    expect(refused.message).toMatch(/^tenant "acme" is over its quota execsPerSecond \(1 per second on this sidecar\); retry in \d+ ms$/);
    const g = await opened(s.globex, "rate-g");
    for (let i = 0; i < 5; i++) expect((await exec(s.globex, g, `return ${i}`)).model.value).toBe(i);
    // Once the bucket refilled, acme's exec is admitted again.
    expect((await admitted(() => exec(s.acme, scope, "return 3"))).model.value).toBe(3);
  });

  it("maxSuspendedBytes: a run that would not fit fails naming the quota; globex parks", async () => {
    const scope = await opened(s.acme, "bytes");
    const parked = await admitted(() => exec(s.acme, scope, "await yield_control('pause'); return 1"));
    expect(parked.model.status).toBe("failed");
    expect(parked.model.error).toMatch(
      /^code mode run could not be suspended: with it \(\d+ bytes\), tenant "acme"'s suspended runs would go over its quota maxSuspendedBytes \(1000 bytes\); this run alone is larger, so no retry can store it\.$/,
    );
    const g = await opened(s.globex, "bytes-g");
    expect((await exec(s.globex, g, "await yield_control('pause'); return 1")).model.status).toBe("waiting");
    const metrics = await scrape(s.proc.ready.metrics!);
    expect(sample(metrics, "codemode_tenant_store_quota_refusals_total", { tenant: "acme", quota: "maxSuspendedBytes" })).toBe(1);
  });
});

/**
 * The replay queue against real processes (an orchestrator and a sidecar with a tenants
 * file): acme floods Control.ReplayRun with a slow record, so its replays wait behind each
 * other and the ones past its bound are refused RESOURCE_EXHAUSTED, naming the tenant;
 * globex's ReplayRun, asked meanwhile, goes next after the one running instead of behind
 * acme's queue (the order is counted, never timed). Then acme has room again.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { toWireTool } from "../../src/shared/tool-wire.js";
import { collectStream, scope as newScope, startCluster, type Cluster } from "../helpers/harness.js";
import { outcomeOf, tenantClients, TOKENS, writeTenantsFile, type TenantClients } from "../helpers/tenants.js";
import { until } from "../helpers/until.js";

let cluster: Cluster;
let acme: TenantClients;
let globex: TenantClients;
beforeAll(async () => {
  const file = writeTenantsFile();
  cluster = await startCluster({ sidecars: 1, orchestratorArgs: ["--tenants-file", file], sidecarEnv: [{ CODEMODE_TENANTS_FILE: file }] });
  const addresses = { sandboxAddress: cluster.sidecars[0]!.address, orchestratorAddress: cluster.orchestratorAddress };
  acme = tenantClients(addresses, TOKENS.acme);
  globex = tenantClients(addresses, TOKENS.globex);
});
afterAll(async () => {
  acme.close();
  globex.close();
  expect(await cluster.stop()).toEqual([0, 0]);
});

/** Runs `code` as `c`'s and returns its scope and code-mode run id, once it completed. */
async function recorded(c: TenantClients, code: string) {
  const scope = newScope("queue");
  await c.control.openRun({
    scope,
    catalog: { case: "tools", value: { tools: [toWireTool({ name: "noop", description: "unused" })] } },
    config: { timeoutMs: 20_000 },
  });
  const out = await collectStream(c.sandbox.exec({ scope, code }));
  expect(out.model.status).toBe("completed");
  return { scope, runId: out.result.codeModeRunId };
}

/** The per-tenant bound on waiting requests (src/sandbox/replay/replay-runner.ts REPLAY_QUEUE_BOUNDS). */
const PER_TENANT = 16;

describe("the replay queue", () => {
  it("one tenant's flood of ReplayRun is bounded and does not hold another tenant's behind it", async () => {
    // A replay of this run takes as long as the run did: the clock reads are replayed, so the loop turns as often.
    const slow = await recorded(acme, "const t0 = Date.now(); let i = 0; while (Date.now() - t0 < 400) i++; return i > 0");
    const { recordJson } = await acme.control.getReplayRecord({ scope: slow.scope, codeModeRunId: slow.runId });
    const quick = await recorded(globex, "return 6 * 7");

    let acmeDone = 0;
    const refusals: string[] = [];
    const flood = Array.from({ length: PER_TENANT + 6 }, () =>
      acme.control.replayRun({ recordJson }).then(
        (r) => {
          expect(r.verdict).toBe("same");
          acmeDone++;
          return "ok";
        },
        (err: { code?: string; message?: string }) => {
          refusals.push(`${err.code}: ${err.message}`);
          return err.code;
        },
      ),
    );
    // The refusals come back at once; by then every accepted replay of acme's is queued or running.
    await until(() => refusals.length > 0, "acme's first refusal");
    expect(refusals[0]).toMatch(/^resource_exhausted: .*too many replays are waiting on this process: 16 for tenant "acme" \(at most 16 each\)/);

    const r = await globex.control.replayRun({ scope: quick.scope, codeModeRunId: quick.runId });
    const acmeBeforeGlobex = acmeDone;
    expect(r.verdict).toBe("same");
    const outcomes = await Promise.all(flood);
    const accepted = outcomes.filter((o) => o === "ok").length;
    expect(accepted).toBeGreaterThanOrEqual(PER_TENANT);
    expect(outcomes.filter((o) => o !== "ok").every((o) => o === "resource_exhausted")).toBe(true);
    // globex went next after the replay running when it asked (one of a check's turns aside), not after acme's queue.
    expect(acmeBeforeGlobex).toBeLessThanOrEqual(2);
    expect(acmeBeforeGlobex).toBeLessThan(accepted);
    // Once acme's replays are done it has room again.
    expect(await outcomeOf(acme.control.replayRun({ recordJson }))).toBe("ok");
  });
});

/**
 * A store outage against real processes: an orchestrator on a real Redis that is stalled
 * (SIGSTOP) and then killed and started again. Plain execs of an open run keep completing
 * (the sidecar serves the run from its run cache, or from what the cache held when the
 * orchestrator stopped trusting it); calls that need the store fail
 * within the store's bound (`--store-timeout-ms`) as UNAVAILABLE, with a message that names
 * the store (never "no run is open" or anything that blames the gateway); the
 * orchestrator's health is NOT_SERVING meanwhile; the outage is logged once, and once when
 * it ends; and everything works again when Redis is back.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { healthClient } from "../helpers/health-client.js";
import { collectStream, execute, scope as newScope, startCluster, type Cluster } from "../helpers/harness.js";
import { startRedis, type RedisServer } from "../helpers/redis.js";

let redis: RedisServer;
let cluster: Cluster;
beforeAll(async () => {
  redis = await startRedis();
  cluster = await startCluster({ sidecars: 1, orchestratorArgs: ["--store", redis.url, "--store-timeout-ms", "1000"] });
});
afterAll(async () => {
  await cluster?.stop();
  await redis?.stop();
});

const STORE_DOWN = "code mode runtime is unavailable: the orchestrator's store cannot be reached; try again shortly.";
/** A generous gRPC deadline: a call that hung on the store would end DEADLINE_EXCEEDED and fail the test. */
const noHang = () => ({ signal: AbortSignal.timeout(15_000) });

describe("a store outage", () => {
  it("stalled, then killed and back: store-bound calls fail UNAVAILABLE naming the store, health follows, it all recovers", async () => {
    const scope = newScope("outage");
    await cluster.control.openRun({
      scope,
      catalog: { case: "tools", value: { tools: [{ name: "slow", description: "answers later", parametersJson: "{}" }] } },
      config: { timeoutMs: 300 },
    });
    const sandbox = cluster.sidecars[0]!.sandbox;
    const parked = await collectStream(sandbox.exec({ scope, code: "return await tools.slow({})" }));
    expect(parked.model).toMatchObject({ status: "waiting" });
    const callId = parked.result.pendingToolCalls[0]!.callId;
    const health = healthClient(cluster.orchestratorAddress);
    expect(await health.check("")).toBe("SERVING");

    for (const outage of ["stall", "kill"] as const) {
      if (outage === "stall") redis.pause();
      else await redis.stop();
      // A plain exec of the open run completes; one of a run this sidecar never resolved cannot.
      const exec = await collectStream(sandbox.exec({ scope, code: "return 1" }, noHang()));
      expect(exec.model).toMatchObject({ status: "completed", value: 1 });
      const unknown = await collectStream(sandbox.exec({ scope: newScope("outage-unknown"), code: "return 1" }, noHang()));
      expect(unknown.model).toMatchObject({ status: "failed", code: "runtime_unavailable", error: STORE_DOWN });
      // What must be stored fails cleanly: a suspension, a wait, a routed answer, a gateway's change.
      const parks = await collectStream(sandbox.exec({ scope, code: "return await tools.slow({})" }, noHang()));
      expect(parks.model).toMatchObject({
        status: "failed",
        code: "runtime_unavailable",
        error: "code mode could not store the suspended run: the orchestrator's store cannot be reached.",
      });
      const wait = await collectStream(sandbox.wait({ scope, codeModeRunId: parked.model.runId! }, noHang()));
      expect(wait.model).toMatchObject({ status: "failed", code: "runtime_unavailable", error: STORE_DOWN });
      await expect(sandbox.bridgeCallback({ scope, callId, outcome: { case: "resultJson", value: "1" } }, noHang())).rejects.toMatchObject({
        code: "unavailable",
        message: expect.stringMatching(/^the orchestrator's store is unavailable: could not /),
      });
      await expect(cluster.control.openRun({ scope, catalog: { case: "tools", value: { tools: [] } } }, noHang())).rejects.toMatchObject({
        code: "unavailable",
      });
      await health.until("", "NOT_SERVING");

      if (outage === "stall") redis.resume();
      else await redis.restart();
      await health.until("", "SERVING");
      if (outage === "stall") {
        // Nothing was lost: the run is still open and still parked.
        expect((await execute({ sandbox }, { scope, code: "return 2" })).model).toMatchObject({ status: "completed", value: 2 });
      }
    }
    // A Redis that came back empty: the run is gone, which the orchestrator says once it answers again.
    await expect(collectStream(sandbox.exec({ scope, code: "return 3" }))).rejects.toMatchObject({ code: "failed_precondition" });
    const fresh = newScope("outage-after");
    await cluster.control.openRun({ scope: fresh, catalog: { case: "tools", value: { tools: [] } } });
    expect((await execute({ sandbox }, { scope: fresh, code: "return 4" })).model).toMatchObject({ status: "completed", value: 4 });

    // Each outage logged once when it began and once when it ended.
    const lines = cluster.orchestrator.stderr;
    const began = lines.filter((l) => l.includes("the orchestrator's store cannot be reached")).length;
    const ended = lines.filter((l) => l.includes("the orchestrator's store is reachable again")).length;
    expect([began, ended]).toEqual([2, 2]);
    expect(lines.some((l) => l.includes("no run is open"))).toBe(false);
    // Served from the cache itself, or (logged, at most once per outage) from what it held.
    const sidecarLines = cluster.sidecars[0]!.proc.stderr;
    expect(sidecarLines.filter((l) => l.includes("serving runs from their last resolution")).length).toBeLessThanOrEqual(2);
  });
});

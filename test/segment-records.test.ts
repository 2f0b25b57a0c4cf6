/**
 * Segment records travel as messages on the sidecar's standing link (not a RecordSegment
 * call per exec): a gateway that reads the trajectory as soon as it has a result finds
 * that segment's step, in order, on a sidecar and orchestrator running
 * as separate processes; (a sidecar whose link is not up makes the RecordSegment call, as before).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { execute, scope as newScope, startCluster, type Cluster } from "./harness.js";

describe("segment records on the link", () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await startCluster({ sidecars: 1 });
  });
  afterAll(async () => {
    await cluster.stop();
  });

  it("each step is readable as soon as its result arrived, in order", async () => {
    const scope = newScope("records");
    await cluster.control.openRun({ scope, catalog: { case: "tools", value: { tools: [] } } });
    const sidecar = cluster.sidecars[0]!;
    for (let i = 0; i < 40; i++) {
      const out = await execute(sidecar, { scope, code: `await tools.search("anything"); return ${i};`, execCallId: `exec-${i}` });
      expect(out.model.status).toBe("completed");
      const { steps } = await cluster.control.getTrajectory({ scope });
      expect(steps.map((s) => [s.callId, s.status])).toEqual(Array.from({ length: i + 1 }, (_, k) => [`exec-${k}`, "completed"]));
    }
  });
});

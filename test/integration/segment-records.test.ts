/**
 * Segment records: a gateway that reads the trajectory as soon as it has a result finds
 * that segment's step, in order. Between separate processes they travel as messages on the
 * sidecar's standing link (not a RecordSegment call per exec); in one process
 * (`codemode start`) the sidecar hands them to its orchestrator directly
 * (src/shared/colocated.ts), only while its link is up to that very orchestrator, and on
 * the wire whenever the orchestrator does not take them.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { Control } from "../../src/gen/codemode/orchestrator/v1/control_pb.js";
import { RecordSegmentRequestSchema } from "../../src/gen/codemode/orchestrator/v1/link_pb.js";
import { createClient } from "../../src/protocol/grpc-client.js";
import { startOrchestrator, type RunningOrchestrator } from "../../src/orchestrator/server.js";
import { OrchestratorLink } from "../../src/sandbox/link/orchestrator-link.js";
import { silentLogger } from "../../src/shared/logger.js";
import type { ColocatedOrchestrator } from "../../src/shared/colocated.js";
import { execute, logged, scope as newScope, startCluster, startStack, type Cluster, type Stack } from "../helpers/harness.js";
import { until } from "../helpers/until.js";

/** 40 execs, each followed at once by a read of the trajectory: every step is there, in order. */
async function stepsReadableAtOnce(control: Cluster["control"], sandbox: Cluster["sidecars"][number]["sandbox"] | Stack["sandbox"]) {
  const scope = newScope("records");
  await control.openRun({ scope, catalog: { case: "tools", value: { tools: [] } } });
  for (let i = 0; i < 40; i++) {
    const out = await execute({ sandbox }, { scope, code: `await tools.search("anything"); return ${i};`, execCallId: `exec-${i}` });
    expect(out.model.status).toBe("completed");
    const { steps } = await control.getTrajectory({ scope });
    expect(steps.map((s) => [s.callId, s.status])).toEqual(Array.from({ length: i + 1 }, (_, k) => [`exec-${k}`, "completed"]));
  }
}

describe("segment records on the link (separate processes)", () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await startCluster({ sidecars: 1 });
  });
  afterAll(async () => {
    await cluster.stop();
  });

  it("each step is readable as soon as its result arrived, in order", async () => {
    const sidecar = cluster.sidecars[0]!;
    // No orchestrator in the sidecar's process: its records go on the wire.
    expect(JSON.parse(await logged(sidecar.proc, /"orchestrator link up"/))).toMatchObject({ recordsInProcess: false });
    await stepsReadableAtOnce(cluster.control, sidecar.sandbox);
  });
});

describe("segment records in one process (codemode start)", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(async () => {
    expect(await stack.stop()).toBe(0);
  });

  it("are handed to the orchestrator without the wire, and each step is readable at once, in order", async () => {
    expect(JSON.parse(await logged(stack.proc, /"orchestrator link up"/))).toMatchObject({ recordsInProcess: true });
    await stepsReadableAtOnce(stack.control, stack.sandbox);
  });
});

describe("a sidecar's link to an orchestrator in its process", () => {
  let orch: RunningOrchestrator;
  let control: ReturnType<typeof createClient<typeof Control.method>>;
  const links: OrchestratorLink[] = [];
  beforeAll(async () => {
    orch = await startOrchestrator({ listen: { host: "127.0.0.1", port: 0 }, linkListen: { host: "127.0.0.1", port: 0 }, log: silentLogger() });
    control = createClient(Control, orch.address);
  });
  afterAll(async () => {
    for (const l of links) l.close();
    control.close();
    await orch.close(1_000);
  });

  /** A link of a new sidecar through `colocated`, once it is up. */
  async function linkThrough(colocated: ColocatedOrchestrator): Promise<OrchestratorLink> {
    const link = new OrchestratorLink(
      orch.linkAddress,
      { sidecarId: `sc-${links.length}`, address: "127.0.0.1:1", version: "test" },
      silentLogger(),
      {},
      undefined,
      colocated,
    );
    links.push(link);
    const up = new Promise<void>((resolve) => link.onStateChange((s) => s === "up" && resolve()));
    link.start(() => 0);
    await up;
    return link;
  }

  /** Sends `n` records of a new run on `link`; resolves to the callIds of the run's trajectory once all are there. */
  async function record(link: OrchestratorLink, n: number): Promise<string[]> {
    const scope = newScope("colocated");
    await control.openRun({ scope, catalog: { case: "tools", value: { tools: [] } } });
    for (let i = 0; i < n; i++) {
      const sent = link.recordOnLink({ scope, step: { kind: "exec", callId: `c-${i}`, status: "completed", startedAtMs: BigInt(Date.now()) }, callDelta: 1 });
      expect(sent).toBe(true);
    }
    const steps = await until(
      async () => {
        const { steps } = await control.getTrajectory({ scope });
        return steps.length >= n && steps;
      },
      `the ${n} records to arrive`,
      { everyMs: 10 },
    );
    // The counters moved with the steps.
    expect((await link.client.resolveRun({ scope, sidecarId: link.sidecarId })).callCount).toBe(n);
    return steps.map((s) => s.callId);
  }

  const expected = (n: number) => Array.from({ length: n }, (_, i) => `c-${i}`);

  it("hands records over in order, with the link's sidecar id", async () => {
    const handed: string[] = [];
    const link = await linkThrough({
      orchestratorId: orch.colocated.orchestratorId,
      onRunOpened: () => undefined,
      record: (sidecarId, req) => {
        handed.push(sidecarId);
        expect(req).toEqual(create(RecordSegmentRequestSchema, req));
        return orch.colocated.record(sidecarId, req);
      },
    });
    expect(await record(link, 25)).toEqual(expected(25));
    expect(handed).toEqual(Array(25).fill(link.sidecarId));
  });

  it("sends them on the wire when the orchestrator does not take them", async () => {
    let offered = 0;
    const link = await linkThrough({
      orchestratorId: orch.colocated.orchestratorId,
      onRunOpened: () => undefined,
      record: () => {
        offered++;
        return false;
      },
    });
    expect(await record(link, 10)).toEqual(expected(10));
    expect(offered).toBe(10);
  });

  it("does not hand them to an orchestrator that is not the one its link is up to", async () => {
    let offered = 0;
    const link = await linkThrough({
      orchestratorId: "orch-elsewhere",
      onRunOpened: () => undefined,
      record: () => {
        offered++;
        return true;
      },
    });
    expect(await record(link, 10)).toEqual(expected(10));
    expect(offered).toBe(0);
  });

  it("refuses a record for a sidecar with no link attached here", () => {
    expect(orch.colocated.record("sc-never-attached", create(RecordSegmentRequestSchema, {}))).toBe(false);
  });
});

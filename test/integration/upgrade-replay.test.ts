/**
 * A rolling upgrade that loses no suspended run (docs/replay.md#upgrades): an orchestrator,
 * a sidecar of the old build (a copy of the package whose code-mode prelude differs, so its
 * snapshots carry another engine fingerprint) and one of the new build. While the old
 * sidecar is attached, a wait on the new one for a run the old one suspended is relayed to
 * it and served there (over Wait and over ExecSession). Once it is gone, such a run is
 * rebuilt by replaying its record on the new build, and it completes with every tool run
 * once; a run whose replay diverges on the new build (its program saw what the old prelude
 * defined) is refused with that reason.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openRun, type TestTool } from "../helpers/gateway.js";
import { collectStream, logged, SHARED_SNAPSHOT_KEY, spawnCodemode, startCluster, type Cluster, type Proc, type ToolCallEvent } from "../helpers/harness.js";
import { until } from "../helpers/until.js";
import { createClient } from "../../src/protocol/grpc-client.js";
import { Sandbox } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import type { ServiceError } from "../../src/protocol/service-error.js";
import { startOldBuildSidecar, type OldBuild } from "../helpers/old-build.js";

let cluster: Cluster;
let old: Proc;
let oldSandbox: OldBuild["sandbox"];

beforeAll(async () => {
  cluster = await startCluster({ sidecars: 1 });
  // The old build: the same package with one more line in code mode's prelude.
  ({ proc: old, sandbox: oldSandbox } = await startOldBuildSidecar(cluster.linkAddress, "codemode-old-build-"));
});
afterAll(async () => {
  oldSandbox?.close();
  if (old && old.child.exitCode === null) await old.stop();
  expect(await cluster.stop()).toEqual([0, 0]);
});

const TOOLS: TestTool[] = [{ name: "lookup", description: "answers later", parameters: { type: "object" } }];
const fresh = () => cluster.sidecars[0]!;

describe("a rolling upgrade", () => {
  const code = "const a = await tools.lookup({ n: 1 }); const b = await tools.lookup({ n: a.n + 1 }); return [a.n, b.n, Math.random() < 1]";

  it("while a sidecar of the run's build is attached, a wait on the new build is served there; each tool runs once", async () => {
    const { scope } = await openRun(cluster, TOOLS, {}, { config: { timeoutMs: 300 } });
    const calls: ToolCallEvent[] = [];
    const parked = await collectStream(oldSandbox.exec({ scope, code }), (c) => calls.push(c));
    expect(parked.model).toMatchObject({ status: "waiting" });
    const oldFrom = old.stderr.length;
    const orchFrom = cluster.orchestrator.stderr.length;
    await fresh().sandbox.bridgeCallback({ scope, callId: calls[0]!.callId, outcome: { case: "resultJson", value: '{"n":1}' } });
    const resumed = await collectStream(fresh().sandbox.wait({ scope, codeModeRunId: parked.model.runId! }), (c) => {
      calls.push(c);
      void fresh().sandbox.bridgeCallback({ scope, callId: c.callId, outcome: { case: "resultJson", value: '{"n":2}' } });
    });
    expect(resumed.model).toMatchObject({ status: "completed", value: [1, 2, true] });
    expect(calls.map((c) => JSON.parse(c.inputJson))).toEqual([{ n: 1 }, { n: 2 }]);
    await logged(old, new RegExp(`"codeModeRunId":"${parked.model.runId}".*"msg":"serving a wait relayed from a sidecar of another build"`), { from: oldFrom });
    await logged(cluster.orchestrator, /"msg":"relaying a wait to a sidecar of the run's build"/, { from: orchFrom });
    expect(fresh().proc.stderr.some((l) => l.includes(parked.model.runId!) && l.includes("rebuilt a run suspended by another build"))).toBe(false);
  });

  it("a relayed wait on ExecSession takes the gateway's answers on its stream", async () => {
    const { scope } = await openRun(cluster, TOOLS, {}, { config: { timeoutMs: 300 } });
    let first = "";
    const parked = await collectStream(oldSandbox.exec({ scope, code }), (c) => (first = c.callId));
    await fresh().sandbox.bridgeCallback({ scope, callId: first, outcome: { case: "resultJson", value: '{"n":1}' } });
    const s = fresh().sandbox.execSession();
    s.send({ message: { case: "wait", value: { scope, codeModeRunId: parked.model.runId! } } });
    const asked: unknown[] = [];
    let model: Record<string, unknown> = {};
    for await (const ev of s.messages) {
      if (ev.event.case === "toolCall") {
        asked.push(JSON.parse(ev.event.value.inputJson));
        s.send({ message: { case: "answer", value: { callId: ev.event.value.callId, outcome: { case: "resultJson", value: '{"n":2}' } } } });
      }
      if (ev.event.case === "result") {
        model = JSON.parse(ev.event.value.modelJson) as Record<string, unknown>;
        s.end();
      }
    }
    expect(model).toMatchObject({ status: "completed", value: [1, 2, true] });
    expect(asked).toEqual([{ n: 2 }]);
  });

  it("a relayed wait whose origin dies is handed back: the run is kept, and a later wait completes it, the tool asked once", async () => {
    const origin = await spawnCodemode(["sandbox", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", cluster.linkAddress, "--threads", "1"], {
      CODEMODE_SNAPSHOT_KEY: SHARED_SNAPSHOT_KEY,
    });
    const originSandbox = createClient(Sandbox, origin.ready.sandbox!);
    // Long enough that the VM is handed back before its deadline would suspend it anyway.
    const { scope } = await openRun(cluster, TOOLS, {}, { config: { timeoutMs: 4_000 } });
    const calls: ToolCallEvent[] = [];
    // The call goes out before the park: the resumed VM only awaits it, so its stored snapshot stays valid.
    const program = 'const p = tools.lookup({ n: 1 }); await yield_control("pause"); const a = await p; return a.n;';
    const parked = await collectStream(oldSandbox.exec({ scope, code: program }), (c) => calls.push(c));
    expect(parked.model).toMatchObject({ status: "waiting", reason: "yield" });
    const runId = parked.model.runId!;
    const oldFrom = old.stderr.length;
    const relayed = collectStream(originSandbox.wait({ scope, codeModeRunId: runId })).catch((err: unknown) => err as ServiceError);
    await logged(old, /"msg":"serving a wait relayed from a sidecar of another build"/, { from: oldFrom });
    originSandbox.close();
    origin.child.kill("SIGKILL");
    expect(((await relayed) as ServiceError).code).toBe("unavailable");
    // The old sidecar's VM suspends again into the store; until it did, a wait is told one is in flight.
    const again = await until(
      async () => {
        const out = await collectStream(fresh().sandbox.wait({ scope, codeModeRunId: runId }), (c) => calls.push(c));
        return out.model.error?.includes("already in flight") ? undefined : out;
      },
      "the handed-back run to be stored",
      { ms: 30_000, everyMs: 300 },
    );
    expect(again.model).toMatchObject({ status: "waiting", reason: "pending_tools" });
    await fresh().sandbox.bridgeCallback({ scope, callId: calls[0]!.callId, outcome: { case: "resultJson", value: '{"n":5}' } });
    const done = await collectStream(fresh().sandbox.wait({ scope, codeModeRunId: runId }), (c) => calls.push(c));
    expect(done.model).toMatchObject({ status: "completed", value: 5 });
    expect(calls).toHaveLength(1);
  });

  it("once no sidecar of the run's build is left, a run it suspended is rebuilt by replay and completes; one whose replay diverges is refused", async () => {
    const same = await openRun(cluster, TOOLS, {}, { config: { timeoutMs: 300 } });
    const calls: ToolCallEvent[] = [];
    const parked = await collectStream(oldSandbox.exec({ scope: same.scope, code }), (c) => calls.push(c));
    expect(parked.model).toMatchObject({ status: "waiting" });
    // The argument depends on the old prelude's global: the new build calls the tool with another one.
    const differs = await openRun(cluster, TOOLS, {}, { config: { timeoutMs: 300 } });
    let callId = "";
    const parked2 = await collectStream(
      oldSandbox.exec({ scope: differs.scope, code: "return await tools.lookup({ old: typeof __oldBuild })" }),
      (c) => (callId = c.callId),
    );
    expect(parked2.model).toMatchObject({ status: "waiting" });
    // The old build's last sidecar leaves (drained: its runs stay in the store).
    expect(await old.stop()).toBe(0);

    const from = fresh().proc.stderr.length;
    const scope = same.scope;
    await fresh().sandbox.bridgeCallback({ scope, callId: calls[0]!.callId, outcome: { case: "resultJson", value: '{"n":1}' } });
    const resumed = await collectStream(fresh().sandbox.wait({ scope, codeModeRunId: parked.model.runId! }), (c) => {
      calls.push(c);
      void fresh().sandbox.bridgeCallback({ scope, callId: c.callId, outcome: { case: "resultJson", value: '{"n":2}' } });
    });
    expect(resumed.model).toMatchObject({ status: "completed", value: [1, 2, true] });
    expect(calls.map((c) => JSON.parse(c.inputJson))).toEqual([{ n: 1 }, { n: 2 }]);
    await logged(fresh().proc, /"verdict":"same".*"msg":"rebuilt a run suspended by another build by replaying its record"/, { from });

    await fresh().sandbox.bridgeCallback({ scope: differs.scope, callId, outcome: { case: "resultJson", value: "1" } });
    const refused = await collectStream(fresh().sandbox.wait({ scope: differs.scope, codeModeRunId: parked2.model.runId! }));
    expect(refused.model.status).toBe("failed");
    expect(refused.model.error).toMatch(
      /suspended by another sandbox build and cannot be rebuilt on this one: replaying its record on this build gave: diverged in segment 1 of 1 \(exec\) at nested call 1/,
    );
  });

  it("a program whose error names another build is not rebuilt: its wait makes each call once and fails with its own error", async () => {
    const { scope } = await openRun(cluster, TOOLS, {}, { config: { timeoutMs: 300 } });
    const calls: ToolCallEvent[] = [];
    const code =
      'await yield_control("p"); await tools.lookup({ n: 9 }); throw new Error("the snapshot was made by a different sandbox build (engine fingerprint differs)")';
    const parked = await collectStream(fresh().sandbox.exec({ scope, code }));
    expect(parked.model).toMatchObject({ status: "waiting", reason: "yield" });
    const out = await collectStream(fresh().sandbox.wait({ scope, codeModeRunId: parked.model.runId! }), (c) => {
      calls.push(c);
      void fresh().sandbox.bridgeCallback({ scope, callId: c.callId, outcome: { case: "resultJson", value: "1" } });
    });
    expect(out.model).toMatchObject({ status: "failed", error: expect.stringContaining("different sandbox build") });
    expect(calls).toHaveLength(1);
  });
});

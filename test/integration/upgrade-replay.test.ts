/**
 * A rolling upgrade that loses no suspended run (docs/replay.md#upgrades): an orchestrator,
 * a sidecar of the old build (a copy of the package whose code-mode prelude differs, so its
 * snapshots carry another engine fingerprint) and one of the new build. A run suspended by
 * the old sidecar is resumed by a wait on the new one: its snapshot cannot be opened
 * there, so the run is rebuilt by replaying its record on the new build, and it
 * completes with every tool run once. A run whose replay diverges on the new build (its
 * program saw what the old prelude defined) is refused with that reason.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openRun, type TestTool } from "../helpers/gateway.js";
import {
  collectStream,
  copyPackage,
  logged,
  SHARED_SNAPSHOT_KEY,
  spawnCodemode,
  startCluster,
  type Cluster,
  type Proc,
  type ToolCallEvent,
} from "../helpers/harness.js";
import { createClient } from "../../src/protocol/grpc-client.js";
import { Sandbox } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";

let cluster: Cluster;
let old: Proc;
let oldSandbox: ReturnType<typeof createClient<typeof Sandbox.method>>;

beforeAll(async () => {
  cluster = await startCluster({ sidecars: 1 });
  // The old build: the same package with one more line in code mode's prelude.
  const dir = copyPackage("codemode-old-build-");
  const prelude = join(dir, "dist", "sandbox", "surfaces", "code-mode", "prelude.js");
  const text = readFileSync(prelude, "utf8");
  expect(text).toContain("const G = globalThis;");
  writeFileSync(prelude, text.replace("const G = globalThis;", 'const G = globalThis; G.__oldBuild = "yes";'));
  old = await spawnCodemode(
    ["sandbox", "--sandbox-address", "127.0.0.1:0", "--orchestrator-address", cluster.linkAddress, "--threads", "1"],
    { CODEMODE_SNAPSHOT_KEY: SHARED_SNAPSHOT_KEY, CODEMODE_BUNDLE: "0" },
    join(dir, "bin", "codemode.js"),
  );
  oldSandbox = createClient(Sandbox, old.ready.sandbox!);
});
afterAll(async () => {
  oldSandbox?.close();
  if (old && old.child.exitCode === null) await old.stop();
  expect(await cluster.stop()).toEqual([0, 0]);
});

const TOOLS: TestTool[] = [{ name: "lookup", description: "answers later", parameters: { type: "object" } }];
const fresh = () => cluster.sidecars[0]!;

describe("a rolling upgrade", () => {
  it("a run suspended by the old build is rebuilt by replay on the new one and completes; each tool runs once", async () => {
    const { scope } = await openRun(cluster, TOOLS, {}, { config: { timeoutMs: 300 } });
    const calls: ToolCallEvent[] = [];
    const code = "const a = await tools.lookup({ n: 1 }); const b = await tools.lookup({ n: a.n + 1 }); return [a.n, b.n, Math.random() < 1]";
    const parked = await collectStream(oldSandbox.exec({ scope, code }), (c) => calls.push(c));
    expect(parked.model).toMatchObject({ status: "waiting" });
    expect(calls.map((c) => JSON.parse(c.inputJson))).toEqual([{ n: 1 }]);
    // The old build's snapshot is not the new one's.
    const from = fresh().proc.stderr.length;
    await fresh().sandbox.bridgeCallback({ scope, callId: calls[0]!.callId, outcome: { case: "resultJson", value: '{"n":1}' } });
    const resumed = await collectStream(fresh().sandbox.wait({ scope, codeModeRunId: parked.model.runId! }), (c) => {
      calls.push(c);
      void fresh().sandbox.bridgeCallback({ scope, callId: c.callId, outcome: { case: "resultJson", value: '{"n":2}' } });
    });
    expect(resumed.model).toMatchObject({ status: "completed", value: [1, 2, true] });
    expect(calls.map((c) => JSON.parse(c.inputJson))).toEqual([{ n: 1 }, { n: 2 }]);
    await logged(fresh().proc, /"verdict":"same".*"msg":"rebuilt a run suspended by another build by replaying its record"/, { from });
  });

  it("a run whose replay diverges on the new build is refused with where it diverged", async () => {
    const { scope } = await openRun(cluster, TOOLS, {}, { config: { timeoutMs: 300 } });
    let callId = "";
    // The argument depends on the old prelude's global: the new build calls the tool with another one.
    const parked = await collectStream(oldSandbox.exec({ scope, code: "return await tools.lookup({ old: typeof __oldBuild })" }), (c) => (callId = c.callId));
    expect(parked.model).toMatchObject({ status: "waiting" });
    await fresh().sandbox.bridgeCallback({ scope, callId, outcome: { case: "resultJson", value: "1" } });
    const refused = await collectStream(fresh().sandbox.wait({ scope, codeModeRunId: parked.model.runId! }));
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

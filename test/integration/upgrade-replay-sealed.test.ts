/**
 * A rebuild by replay trusts only sealed records (docs/replay.md#upgrades): an orchestrator on
 * Redis, a sidecar of an old build (a copy of the package whose code-mode prelude differs)
 * and one of the new build that seals under a newer key and still lists the old one. Runs the
 * old build parked are rebuilt on the new one once the old one is gone: the intact record
 * rebuilds and completes; a record whose program or recorded answer was edited in Redis (edits
 * that would replay the same up to the suspension, and then return what the editor chose), or
 * whose seal was taken off, is refused with that reason, and nothing of it runs.
 */
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openRun, type TestTool } from "../helpers/gateway.js";
import { collectStream, logged, startCluster, type Cluster, type Proc, type ToolCallEvent } from "../helpers/harness.js";
import { startOldBuildSidecar, type OldBuild } from "../helpers/old-build.js";
import { startRedis, type RedisServer } from "../helpers/redis.js";
import { until } from "../helpers/until.js";
import { replayKey } from "../../src/orchestrator/replay/replay-records.js";
import { REDIS_PREFIX } from "../../src/orchestrator/suspended/redis-store.js";

/** The new build's sealing key; the old build's (SHARED_SNAPSHOT_KEY) stays listed for reading. */
const NEW_KEY = "upgrade-replay-sealed-new-key-0123456789abcdef";

let redis: RedisServer;
let inspect: Redis;
let cluster: Cluster;
let old: Proc;
let oldSandbox: OldBuild["sandbox"];

beforeAll(async () => {
  redis = await startRedis();
  inspect = new Redis(redis.url);
  cluster = await startCluster({ sidecars: 1, orchestratorArgs: ["--store", redis.url], sidecarEnv: [{ CODEMODE_SNAPSHOT_KEYS: `k2:${NEW_KEY}` }] });
  ({ proc: old, sandbox: oldSandbox } = await startOldBuildSidecar(cluster.linkAddress, "codemode-old-build-sealed-"));
});
afterAll(async () => {
  oldSandbox?.close();
  if (old && old.child.exitCode === null) await old.stop();
  const codes = await cluster?.stop();
  inspect?.disconnect();
  await redis?.stop();
  expect(codes).toEqual([0, 0]);
});

const TOOLS: TestTool[] = [{ name: "lookup", description: "answers later", parameters: { type: "object" } }];
const fresh = () => cluster.sidecars[0]!;
type RunScope = Awaited<ReturnType<typeof openRun>>["scope"];

/** A program parked by the old build: its scope, run id, the calls it made, and its record's Redis key once stored. */
async function park(code: string, answerLive?: (c: ToolCallEvent) => string | undefined) {
  const { scope } = await openRun(cluster, TOOLS, {}, { config: { timeoutMs: 300 } });
  const calls: ToolCallEvent[] = [];
  const parked = await collectStream(oldSandbox.exec({ scope, code }), (c) => {
    calls.push(c);
    const answer = answerLive?.(c);
    if (answer !== undefined) void oldSandbox.bridgeCallback({ scope, callId: c.callId, outcome: { case: "resultJson", value: answer } });
  });
  expect(parked.model).toMatchObject({ status: "waiting" });
  const runId = parked.model.runId!;
  const key = `${REDIS_PREFIX}replay:${replayKey(scope, runId)}`;
  await until(async () => (await inspect.llen(key)) === 1 || undefined, "the exec's replay record in Redis");
  return { scope, runId, calls, key };
}

/** Rewrites the run's stored exec record in Redis. */
async function edit(key: string, change: (json: string) => string) {
  const [stored] = await inspect.lrange(key, 0, 0);
  const changed = change(stored!);
  expect(changed).not.toBe(stored);
  await inspect.lset(key, 0, changed);
}

async function waitOnNewBuild(scope: RunScope, runId: string, calls: ToolCallEvent[], answer: (c: ToolCallEvent) => string) {
  return collectStream(fresh().sandbox.wait({ scope, codeModeRunId: runId }), (c) => {
    calls.push(c);
    void fresh().sandbox.bridgeCallback({ scope, callId: c.callId, outcome: { case: "resultJson", value: answer(c) } });
  });
}

describe("a rebuild by replay checks the record's seals", () => {
  it("rebuilds an intact record sealed under a key still listed; refuses a record whose program, answer or seal was changed in the store", async () => {
    // Intact: rebuilt and completed, each tool run once.
    const intact = await park("const a = await tools.lookup({ n: 1 }); const b = await tools.lookup({ n: a.n + 1 }); return [a.n, b.n]");
    // Program: the edit keeps every call up to the suspension, so only the seal tells it apart.
    const program = await park('const a = await tools.lookup({ n: 1 }); return "kept " + a.n');
    // Answer: the first call was answered inside the exec; the record's tape keeps that answer.
    const answer = await park("const a = await tools.lookup({ n: 1 }); const b = await tools.lookup({ n: 2 }); return a.v + b.v", (c) =>
      JSON.parse(c.inputJson).n === 1 ? '{"v":"real"}' : undefined,
    );
    expect(answer.calls.map((c) => JSON.parse(c.inputJson))).toEqual([{ n: 1 }, { n: 2 }]);
    // Unsealed: the same record with its seal taken off.
    const unsealed = await park("const a = await tools.lookup({ n: 1 }); return a.n");

    const sealOf = async (key: string) => (JSON.parse((await inspect.lindex(key, 0))!) as { seal?: string }).seal;
    expect(await sealOf(intact.key)).toMatch(/^cmrs1:key-[0-9a-f]{12}:/);
    await edit(program.key, (j) => j.replace('return \\"kept \\" + a.n', 'return \\"pwned\\"'));
    await edit(answer.key, (j) => j.replace('\\"v\\":\\"real\\"', '\\"v\\":\\"evil\\"'));
    await edit(unsealed.key, (j) => j.replace(/,"seal":"[^"]*"\}$/, "}"));

    // The old build's last sidecar leaves (drained: its runs stay in the store).
    expect(await old.stop()).toBe(0);
    const from = fresh().proc.stderr.length;

    await fresh().sandbox.bridgeCallback({ scope: intact.scope, callId: intact.calls[0]!.callId, outcome: { case: "resultJson", value: '{"n":1}' } });
    const done = await waitOnNewBuild(intact.scope, intact.runId, intact.calls, () => '{"n":2}');
    expect(done.model).toMatchObject({ status: "completed", value: [1, 2] });
    expect(intact.calls.map((c) => JSON.parse(c.inputJson))).toEqual([{ n: 1 }, { n: 2 }]);
    await logged(fresh().proc, new RegExp(`"codeModeRunId":"${intact.runId}".*"verdict":"same".*"msg":"rebuilt a run suspended by another build`), { from });
    // The new build's own segment is sealed under its sealing key.
    await until(async () => (await inspect.llen(intact.key)) === 2 || undefined, "the wait's replay record in Redis");
    expect(JSON.parse((await inspect.lindex(intact.key, 1))!).seal).toMatch(/^cmrs1:k2:/);

    const refusal =
      /suspended by another sandbox build and cannot be rebuilt on this one: its replay record failed authentication \(segment 1 of 1: the replay record's seal does not match/;
    for (const run of [program, answer]) {
      await fresh().sandbox.bridgeCallback({ scope: run.scope, callId: run.calls.at(-1)!.callId, outcome: { case: "resultJson", value: '{"v":"x","n":1}' } });
      const before = run.calls.length;
      const refused = await waitOnNewBuild(run.scope, run.runId, run.calls, () => '{"v":"y"}');
      expect(refused.model.status).toBe("failed");
      expect(refused.model.error).toMatch(refusal);
      expect(run.calls).toHaveLength(before);
      await logged(
        fresh().proc,
        new RegExp(`"level":50.*"codeModeRunId":"${run.runId}".*"msg":"refused to rebuild a run whose replay record failed authentication`),
        { from },
      );
      expect(
        fresh()
          .proc.stderr.slice(from)
          .some((l) => l.includes(run.runId) && l.includes('"verdict"')),
      ).toBe(false);
    }

    await fresh().sandbox.bridgeCallback({ scope: unsealed.scope, callId: unsealed.calls[0]!.callId, outcome: { case: "resultJson", value: '{"n":1}' } });
    const bare = await waitOnNewBuild(unsealed.scope, unsealed.runId, unsealed.calls, () => "1");
    expect(bare.model).toMatchObject({ status: "failed" });
    expect(bare.model.error).toMatch(/cannot be rebuilt on this one: its replay record \(segment 1 of 1\) is not sealed/);
  });
});

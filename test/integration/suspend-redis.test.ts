// Suspended runs in a real Redis: an orchestrator restarted between `exec` and `wait`
// loses nothing; a snapshot tampered with inside Redis, or an older one of the same run
// written back (a replay), is refused, never restored.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Redis } from "ioredis";
import { openRun, type TestTool } from "../helpers/gateway.js";
import { execute, logged, startCluster, waitFor, type Cluster, type scope as Scope, type ToolCallEvent } from "../helpers/harness.js";
import { until } from "../helpers/until.js";
import { startRedis, type RedisServer } from "../helpers/redis.js";

const tools: TestTool[] = [
  { name: "slow_lookup", description: "Looks something up slowly" },
  { name: "fast_add", description: "Adds two numbers" },
];

let redis: RedisServer;
let cluster: Cluster;
let inspect: Redis;

beforeAll(async () => {
  redis = await startRedis();
  inspect = new Redis(redis.url);
  cluster = await startCluster({ sidecars: 2, orchestratorArgs: ["--store", redis.url] });
});

afterAll(async () => {
  const codes = await cluster?.stop();
  inspect?.disconnect();
  await redis?.stop();
  expect(codes?.every((c) => c === 0)).toBe(true);
});

/** A gateway retries an answer while the orchestrator behind the sidecar is coming back. */
async function answerWithRetry(scope: ReturnType<typeof Scope>, callId: string, value: unknown) {
  return until(
    () =>
      cluster.sidecars[1]!.sandbox.bridgeCallback({ scope, callId, outcome: { case: "resultJson", value: JSON.stringify(value) } }).catch((err: unknown) => {
        if ((err as { code?: string }).code !== "unavailable") throw err;
        return undefined;
      }),
    "the sidecar to take the answer (its orchestrator is coming back)",
    { everyMs: 250 },
  );
}

describe("suspended runs in Redis", () => {
  it("an orchestrator restart between exec and wait loses nothing", async () => {
    const { scope } = await openRun(cluster, tools, {}, { config: { timeoutMs: 1000 } });
    const calls: ToolCallEvent[] = [];
    const exec = await execute(
      { sandbox: cluster.sidecars[0]!.sandbox },
      { scope, code: `text("before"); const r = await tools.slow_lookup({}); text("after " + r); return r + await tools.fast_add({});` },
      (c) => calls.push(c),
    );
    expect(exec.model).toMatchObject({ status: "waiting", reason: "pending_tools" });

    await cluster.restartOrchestrator();
    expect((await answerWithRetry(scope, calls[0]!.callId, 40)).deliveredLive).toBe(false);

    const done = await waitFor(cluster.sidecars[1]!.sandbox, { scope, runId: exec.model.runId! }, (c) => {
      void cluster.sidecars[1]!.sandbox.bridgeCallback({ scope, callId: c.callId, outcome: { case: "resultJson", value: "2" } });
    });
    expect(done.model).toMatchObject({ status: "completed", value: 42, output: [{ type: "text", text: "after 40" }] });
    expect(done.model.telemetry.callCount).toBe(2);
    const traj = await cluster.control.getTrajectory({ scope });
    expect(traj.steps.map((s) => [s.kind, s.status])).toEqual([
      ["exec", "waiting"],
      ["wait", "completed"],
    ]);
    expect(await inspect.exists(`codemode:run:${exec.model.runId}`)).toBe(0);
  });

  it("refuses and deletes a snapshot tampered with in the store", async () => {
    const { scope } = await openRun(cluster, tools);
    const exec = await execute({ sandbox: cluster.sidecars[0]!.sandbox }, { scope, code: `await yield_control(); return "restored";` });
    expect(exec.model.status).toBe("waiting");
    const key = `codemode:run:${exec.model.runId}`;
    const snap = await inspect.hgetBuffer(key, "snap");
    expect(snap?.byteLength).toBe(exec.model.telemetry.snapshotBytes);
    snap![Math.floor(snap!.byteLength / 2)]! ^= 0x01;
    await inspect.hset(key, "snap", snap!);

    const refused = await waitFor(cluster.sidecars[1]!.sandbox, { scope, runId: exec.model.runId! });
    expect(refused.model).toMatchObject({ status: "failed", code: "internal_error" });
    expect(refused.model.error).toMatch(/snapshot failed authentication and was discarded/);
    expect(await inspect.exists(key)).toBe(0);
    const again = await waitFor(cluster.sidecars[0]!.sandbox, { scope, runId: exec.model.runId! });
    expect(again.model.error).toBe("code mode run is unavailable or expired.");
  });

  it("refuses and deletes an older snapshot of a run written back into Redis (a replay inside the TTL)", async () => {
    const { scope } = await openRun(cluster, tools);
    const exec = await execute(
      { sandbox: cluster.sidecars[0]!.sandbox },
      { scope, code: `await yield_control(); text("second segment"); await yield_control(); return "end";` },
    );
    expect(exec.model.status).toBe("waiting");
    const runId = exec.model.runId!;
    const key = `codemode:run:${runId}`;
    const generation = `codemode:gen:${runId}`;
    expect(await inspect.get(generation)).toBe("1");
    // Everything of generation 1's record a replay needs: sealed bytes, metadata, pending list.
    const first = { snap: (await inspect.hgetBuffer(key, "snap"))!, meta: (await inspect.hget(key, "meta"))!, pending: (await inspect.hget(key, "pending"))! };

    const second = await waitFor(cluster.sidecars[1]!.sandbox, { scope, runId });
    expect(second.model).toMatchObject({ status: "waiting", runId, output: [{ type: "text", text: "second segment" }] });
    expect(await inspect.get(generation)).toBe("2");
    expect((await inspect.hgetBuffer(key, "snap"))!.equals(first.snap)).toBe(false);

    // Put generation 1 back, all but the store's generation counter.
    await inspect.hset(key, "snap", first.snap, "meta", first.meta, "pending", first.pending);
    const refused = await waitFor(cluster.sidecars[0]!.sandbox, { scope, runId });
    expect(refused.model).toMatchObject({ status: "failed", code: "internal_error" });
    expect(refused.model.error).toMatch(
      /snapshot failed authentication and was discarded \(the snapshot was sealed for generation 1 of this run but the store is at generation 2/,
    );
    await logged(cluster.sidecars[0]!.proc, /refused a suspended run whose snapshot failed authentication; deleting it/);
    // Deleted: its stored bytes are no longer the run's state and can never become valid again.
    expect(await inspect.exists(key)).toBe(0);
    expect((await waitFor(cluster.sidecars[1]!.sandbox, { scope, runId })).model.error).toBe("code mode run is unavailable or expired.");
    // The generation outlives the run, so the old record cannot come back as a new run either.
    expect(await inspect.get(generation)).toBe("2");
  });

  it("what the generation does not stop: a writer of the whole store rolls a run back, counter included", async () => {
    const { scope } = await openRun(cluster, tools);
    const exec = await execute(
      { sandbox: cluster.sidecars[0]!.sandbox },
      { scope, code: `await yield_control(); text("second segment"); await yield_control(); return "end";` },
    );
    const runId = exec.model.runId!;
    const key = `codemode:run:${runId}`;
    const first = { snap: (await inspect.hgetBuffer(key, "snap"))!, meta: (await inspect.hget(key, "meta"))!, pending: (await inspect.hget(key, "pending"))! };
    expect((await waitFor(cluster.sidecars[1]!.sandbox, { scope, runId })).model.status).toBe("waiting");
    await inspect.hset(key, "snap", first.snap, "meta", first.meta, "pending", first.pending);
    await inspect.set(`codemode:gen:${runId}`, "1", "KEEPTTL");
    // Within the snapshot's not-after, the second segment runs again: the documented limit.
    const again = await waitFor(cluster.sidecars[0]!.sandbox, { scope, runId });
    expect(again.model).toMatchObject({ status: "waiting", output: [{ type: "text", text: "second segment" }] });
    await cluster.control.closeRun({ scope });
  });

  it("refuses a run whose stored metadata was edited (limits raised, a tool call relabelled as a yield)", async () => {
    const { scope } = await openRun(cluster, tools, {}, { config: { timeoutMs: 1000 } });
    for (const edit of ["config", "pending"] as const) {
      const exec = await execute({ sandbox: cluster.sidecars[0]!.sandbox }, { scope, code: `return await tools.slow_lookup({});` });
      expect(exec.model.status).toBe("waiting");
      const key = `codemode:run:${exec.model.runId}`;
      if (edit === "config") {
        const meta = JSON.parse((await inspect.hget(key, "meta"))!) as { configJson: string; outputBytes: number };
        meta.configJson = JSON.stringify({ ...(JSON.parse(meta.configJson) as object), timeoutMs: 60000, maxOutputBytes: 10485760 });
        await inspect.hset(key, "meta", JSON.stringify(meta));
      } else {
        // Relabelled as a yield, the call would resolve without the tool ever running.
        const pending = JSON.parse((await inspect.hget(key, "pending"))!) as Array<{ kind: string }>;
        pending[0]!.kind = "yield";
        await inspect.hset(key, "pending", JSON.stringify(pending));
      }
      const refused = await waitFor(cluster.sidecars[1]!.sandbox, { scope, runId: exec.model.runId! });
      expect(refused.model).toMatchObject({ status: "failed", code: "internal_error" });
      expect(refused.model.error).toMatch(/seal does not match/);
    }
  });
});

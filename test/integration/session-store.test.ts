/**
 * Code mode's session store (`store(key, value)` / `load(key)`) against real processes: a
 * value stored in one exec is loaded by the next exec of the same session, on the same
 * sidecar, on another one, in another agent run of the session, and (on Redis) after the
 * orchestrator restarted; another session never sees it. The limits and bad values are
 * catchable errors naming the rule; a cell's writes are visible to other cells once it
 * completes or parks `waiting`, and dropped when it fails. Gateways read and clear a
 * session's store through Control; telemetry and the trajectory show its use.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { collectStream, execute, scope as newScope, startCluster, startExec, waitFor, type Cluster } from "../helpers/harness.js";
import { startRedis, type RedisServer } from "../helpers/redis.js";
import { until } from "../helpers/until.js";

let cluster: Cluster;
beforeAll(async () => {
  cluster = await startCluster({ sidecars: 2 });
});
afterAll(async () => {
  expect(await cluster.stop()).toEqual([0, 0, 0]);
});

type Scope = ReturnType<typeof newScope>;

/** Opens a run for `scope` (an empty catalog) with `config`. */
async function open(c: Cluster, scope: Scope, config: Record<string, unknown> = {}): Promise<Scope> {
  await c.control.openRun({ scope, catalog: { case: "tools", value: { tools: [] } }, config });
  return scope;
}

/** Another agent run (or another session) of `scope`: the same agent id and session key unless overridden. */
const sibling = (scope: Scope, over: Partial<Scope> = {}): Scope => ({
  ...scope,
  sessionId: `${scope.sessionId}-b`,
  agentRunId: `${scope.agentRunId}-b`,
  ...over,
});

const run = (c: Cluster, i: number, scope: Scope, code: string) => execute({ sandbox: c.sidecars[i]!.sandbox }, { scope, code });

describe("the session store", () => {
  it("store in one exec, load in the next: on the same sidecar, on another one, and in another agent run of the session", async () => {
    const scope = await open(cluster, newScope("store"));
    const stored = await run(cluster, 0, scope, "await store('plan', { steps: [1, 2, 3], note: 'é' }); return await load('plan')");
    expect(stored.model).toMatchObject({ status: "completed", value: { steps: [1, 2, 3], note: "é" } });
    expect(stored.result.telemetry?.sessionStore).toMatchObject({ loads: 1, stores: 1, keysWritten: 1, keys: 1 });

    expect((await run(cluster, 0, scope, "return await load('plan')")).model).toMatchObject({ value: { steps: [1, 2, 3], note: "é" } });
    expect((await run(cluster, 1, scope, "return [await load('plan'), await load('missing')]")).model).toMatchObject({
      value: [{ steps: [1, 2, 3], note: "é" }, null],
    });
    // A new agent run of the same session (agent id and session key) shares it.
    const next = await open(cluster, sibling(scope));
    expect((await run(cluster, 1, next, "return (await load('plan')).steps.length")).model).toMatchObject({ value: 3 });
    // load of a missing key is undefined.
    expect((await run(cluster, 0, scope, "return typeof (await load('missing'))")).model).toMatchObject({ value: "undefined" });
  });

  it("another session, or another agent with the same session key, does not see it", async () => {
    const scope = await open(cluster, newScope("store-iso"));
    await run(cluster, 0, scope, "await store('k', 'mine')");
    const otherKey = await open(cluster, sibling(scope, { sessionKey: `${scope.sessionKey}-other` }));
    const otherAgent = await open(cluster, sibling(scope, { agentId: `${scope.agentId}-other` }));
    for (const s of [otherKey, otherAgent]) expect((await run(cluster, 1, s, "return typeof (await load('k'))")).model).toMatchObject({ value: "undefined" });
  });

  it("the limits and bad values are catchable errors naming the rule", async () => {
    const scope = await open(cluster, newScope("store-limits"), { maxSessionValueBytes: 64, maxSessionKeys: 3, maxSessionBytes: 2048 });
    const tryIt = (expr: string) => `try { await ${expr}; return 'ok' } catch (e) { return [e.name, e.message] }`;
    const cases: Array<[string, [string, RegExp] | "ok"]> = [
      ["store('big', 'x'.repeat(100))", ["RangeError", /^store: the value is 102 bytes of JSON, over maxSessionValueBytes \(64\)\.$/]],
      ["store('', 1)", ["RangeError", /^store: a key must be 1 to 128 characters, got 0\.$/]],
      ["store('k'.repeat(129), 1)", ["RangeError", /^store: a key must be 1 to 128 characters, got 129\.$/]],
      ["store('a\\nb', 1)", ["TypeError", /^store: a key must be printable/]],
      ["load(42)", ["TypeError", /^store and load take a string key, got number\.$/]],
      ["store('f', () => 1)", ["TypeError", /^store: the value is a function, which JSON cannot hold\.$/]],
      ["store('u', undefined)", ["TypeError", /^store: the value is undefined/]],
      ["store('n', { x: NaN })", ["TypeError", /^store: the value\.x is NaN/]],
      ["store('m', new Map())", ["TypeError", /^store: the value is not a plain object or array/]],
      ["store('b', 10n)", ["TypeError", /^store: the value is a bigint/]],
      ["(() => { const a = []; a.push(a); return store('c', a) })()", ["TypeError", /refers back to itself/]],
      ["store('one', 1)", "ok"],
    ];
    for (const [expr, want] of cases) {
      const { model } = await run(cluster, 0, scope, tryIt(expr));
      if (want === "ok") expect(model.value, expr).toBe("ok");
      else {
        const [name, message] = model.value as [string, string];
        expect([name, message], expr).toEqual([want[0], expect.stringMatching(want[1])]);
      }
    }
    // Three keys at most: the fourth is refused, in the cell that writes it.
    const keys = await run(cluster, 0, scope, `await store('two', 2); await store('three', 3); ${tryIt("store('four', 4)")}`);
    expect(keys.model.value).toEqual(["RangeError", "store: the session would hold 4 keys, over maxSessionKeys (3)."]);
    // A rewrite of a held key is no new key.
    expect((await run(cluster, 1, scope, "await store('one', 'uno'); return await load('one')")).model.value).toBe("uno");
  });

  it("the commit rule: a cell's writes are seen at once by its own loads, by others once it completes or parks, and dropped when it fails", async () => {
    const scope = await open(cluster, newScope("store-commit"));
    // A failing cell: its own load saw the write, nobody else ever does.
    const failed = await run(cluster, 0, scope, "await store('a', 1); text(String(await load('a'))); throw new Error('boom')");
    expect(failed.model).toMatchObject({ status: "failed", output: [{ type: "text", text: "1" }] });
    expect((await run(cluster, 1, scope, "return typeof (await load('a'))")).model.value).toBe("undefined");

    // A parked cell (waiting) is a checkpoint: its writes are visible while it waits...
    const parked = await run(cluster, 0, scope, "await store('a', 'before'); await yield_control('pause'); await store('a', 'after'); throw new Error('late')");
    expect(parked.model).toMatchObject({ status: "waiting", reason: "yield" });
    expect((await run(cluster, 1, scope, "return await load('a')")).model.value).toBe("before");
    // ...and the wait that fails drops only what it wrote after the checkpoint.
    const resumed = await waitFor(cluster.sidecars[1]!.sandbox, { scope, runId: parked.model.runId! });
    expect(resumed.model).toMatchObject({ status: "failed" });
    expect((await run(cluster, 0, scope, "return await load('a')")).model.value).toBe("before");
  });

  it("gateways read and clear a session's store; the trajectory shows what each step wrote", async () => {
    const scope = await open(cluster, newScope("store-control"));
    await run(cluster, 0, scope, "await store('b', [1]); await store('a', { x: 'y' })");
    const got = await cluster.control.getSessionStore({ agentId: scope.agentId, sessionKey: scope.sessionKey });
    expect(got.entries.map((e) => [e.key, e.valueJson])).toEqual([
      ["a", '{"x":"y"}'],
      ["b", "[1]"],
    ]);
    expect(Number(got.bytes)).toBe("a".length + '{"x":"y"}'.length + "b".length + "[1]".length);
    expect(Number(got.expiresAtMs)).toBeGreaterThan(Date.now() + 6 * 86_400_000);
    const steps = (await cluster.control.getTrajectory({ scope })).steps;
    expect(steps.map((s) => [s.sessionKeysWritten, Number(s.sessionBytesWritten)])).toEqual([[2, '{"x":"y"}'.length + "[1]".length]]);

    expect((await cluster.control.clearSessionStore({ agentId: scope.agentId, sessionKey: scope.sessionKey })).keysDeleted).toBe(2);
    expect((await run(cluster, 1, scope, "return typeof (await load('a'))")).model.value).toBe("undefined");
    await expect(cluster.control.getSessionStore({ agentId: "", sessionKey: "k" })).rejects.toMatchObject({ code: "invalid_argument" });
  });

  it("a run with sessionStore false, and tool_search_code, have no store", async () => {
    const off = await open(cluster, newScope("store-off"), { sessionStore: false });
    expect((await run(cluster, 0, off, "return [typeof store, typeof load]")).model.value).toEqual(["undefined", "undefined"]);
    const ts = newScope("store-ts");
    await cluster.control.openRun({ scope: ts, catalog: { case: "tools", value: { tools: [] } }, toolSearch: { enabled: true, mode: "code" } });
    const out = await collectStream(cluster.sidecars[0]!.sandbox.exec({ scope: ts, code: "return [typeof store, typeof load]" }));
    expect(out.model.value).toEqual(["undefined", "undefined"]);
  });
});

describe("the session store on Redis", () => {
  let redis: RedisServer;
  let rc: Cluster;
  beforeAll(async () => {
    redis = await startRedis();
    rc = await startCluster({ sidecars: 2, orchestratorArgs: ["--store", redis.url] });
  });
  afterAll(async () => {
    await rc?.stop();
    await redis?.stop();
  });

  it("survives an orchestrator restart, and keeps its limits across replicas' commits", async () => {
    const scope = await open(rc, newScope("store-redis"), { maxSessionKeys: 2 });
    await run(rc, 0, scope, "await store('x', { deep: [true, null, 'ü'] })");
    await rc.restartOrchestrator();
    await open(rc, scope, { maxSessionKeys: 2 });
    // The sidecar's link re-attaches with backoff: an exec may find the orchestrator away until then.
    const loaded = await until(async () => {
      const out = await run(rc, 1, scope, "return await load('x')");
      return out.model.code === "runtime_unavailable" ? undefined : out;
    }, "the sidecar's link to come back after the restart");
    expect(loaded.model).toMatchObject({ status: "completed", value: { deep: [true, null, "ü"] } });
    const got = await rc.control.getSessionStore({ agentId: scope.agentId, sessionKey: scope.sessionKey });
    expect(got.entries.map((e) => e.key)).toEqual(["x"]);
    // Two cells each add a key the limit allows alone: b read the store before a committed,
    // so its own check passes, and its commit is refused whole by the store.
    const b = startExec(rc.sidecars[1]!.sandbox, {
      scope,
      code: "await load('x'); text('read'); await new Promise((r) => setTimeout(r, 2000)); await store('z', 2); return 'b'",
    });
    await b.running;
    const a = await run(rc, 0, scope, "await store('y', 1); await yield_control('hold'); return 'a'");
    expect(a.model).toMatchObject({ status: "waiting" });
    expect((await b.done).model).toMatchObject({
      status: "failed",
      error: expect.stringMatching(
        /^code mode could not keep this cell's session-store writes: the session store would hold 3 keys, over maxSessionKeys \(2\)\.$/,
      ),
    });
    expect((await rc.control.getSessionStore({ agentId: scope.agentId, sessionKey: scope.sessionKey })).entries.map((e) => e.key)).toEqual(["x", "y"]);
  });
});

/**
 * What the open-run registries (in memory, and in a real redis-server) promise about a
 * change the orchestrator derives from a run's spec: it is set only over the spec it was
 * derived from, so a gateway's OpenRun or CloseRun that came in between wins. And that a
 * run's trajectory is its last MAX_STEPS steps, oldest first, however many it recorded.
 */
import { randomUUID } from "node:crypto";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MAX_STEPS, MemoryRunRegistry, type RunRegistry, type RunSpec } from "../../src/orchestrator/runs/runs.js";
import { RedisRunRegistry } from "../../src/orchestrator/runs/redis-runs.js";
import { createLogger } from "../../src/shared/logger.js";
import { startRedis, type RedisServer } from "../helpers/redis.js";

let redis: RedisServer;
const clients: Redis[] = [];
beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  for (const c of clients) c.disconnect();
  await redis?.stop();
});

const scope = { agentId: "a", sessionId: "s", sessionKey: "k", agentRunId: "r" };
function spec(over: Partial<RunSpec> = {}): RunSpec {
  return {
    scope,
    catalogId: "cat",
    rules: { allow: [], deny: [], allowNone: false },
    config: { timeoutMs: 1000 },
    disableTools: false,
    view: [],
    viewVersion: "v1",
    openedAtMs: 1,
    toolSearch: { enabled: true },
    ...over,
  };
}

describe.each([
  { kind: "memory", open: (): RunRegistry => new MemoryRunRegistry() },
  {
    kind: "redis",
    open: (): RunRegistry => {
      const client = new Redis(redis.url);
      clients.push(client);
      return new RedisRunRegistry(client, createLogger("test", "silent"), `test:${randomUUID()}:`);
    },
  },
])("$kind run registry", ({ open }) => {
  it("replaces a spec that is still the one read, keeping counters", async () => {
    const runs = open();
    await runs.open(spec());
    const step = { kind: "exec", callId: "e1", codeModeRunId: "cm_1", status: "completed", errorCode: "", startedAtMs: 1, durationMs: 1, nestedCalls: [] };
    await runs.record(scope, step, { search: 1, describe: 0, call: 2 });
    const { counters, ...read } = (await runs.get(scope))!;
    expect(await runs.replaceSpec(read, { ...read, fallbackReason: "no runtime" })).toBe(true);
    expect(await runs.get(scope)).toEqual({ ...read, fallbackReason: "no runtime", counters });
  });

  it("leaves a spec re-opened since it was read, and a run closed since", async () => {
    const runs = open();
    await runs.open(spec());
    const { counters: _c, ...read } = (await runs.get(scope))!;
    // The gateway opens the run again with another policy before the fallback is written.
    const reopened = spec({ rules: { allow: [], deny: ["core:*"], allowNone: false }, openedAtMs: 2 });
    await runs.open(reopened);
    expect(await runs.replaceSpec(read, { ...read, fallbackReason: "no runtime" })).toBe(false);
    expect((await runs.get(scope))?.rules).toEqual(reopened.rules);
    expect((await runs.get(scope))?.fallbackReason).toBeUndefined();

    await runs.close(scope);
    expect(await runs.replaceSpec(reopened, { ...reopened, fallbackReason: "no runtime" })).toBe(false);
    expect(await runs.get(scope)).toBeUndefined();
  });

  it("keeps a run's last MAX_STEPS steps, oldest first, past every trim", async () => {
    const runs = open();
    await runs.open(spec());
    const step = (i: number) => ({
      kind: "exec",
      callId: `e${i}`,
      codeModeRunId: `cm_${i}`,
      status: "completed",
      errorCode: "",
      startedAtMs: i,
      durationMs: 1,
      nestedCalls: [],
    });
    // Past the memory registry's slack twice over, and stopping between two of its cuts.
    const total = 2 * MAX_STEPS + 317;
    for (let i = 1; i <= total; i++) {
      await runs.record(scope, step(i), { search: 0, describe: 0, call: 1 });
      if (i === MAX_STEPS + 1 || i === total) {
        const ids = (await runs.trajectory(scope))!.map((s) => s.callId);
        expect(ids).toHaveLength(MAX_STEPS);
        expect(ids[0]).toBe(`e${i - MAX_STEPS + 1}`);
        expect(ids.at(-1)).toBe(`e${i}`);
      }
    }
    expect((await runs.get(scope))?.counters.call).toBe(total);
  });
});

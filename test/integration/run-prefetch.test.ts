/**
 * A run is resolved as it is opened when the orchestrator runs in the sidecar's process
 * (`codemode start`, src/sandbox/link/run-prefetch.ts), so its first exec finds the answer cached
 * or in flight instead of asking the orchestrator itself. Concurrent resolves of one run
 * share one request to the orchestrator (src/sandbox/link/run-resolver.ts), unless the run was
 * invalidated since the request went out.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Control } from "../../src/gen/codemode/orchestrator/v1/control_pb.js";
import { createClient } from "../../src/protocol/grpc-client.js";
import { startOrchestrator, type RunningOrchestrator } from "../../src/orchestrator/server.js";
import { OrchestratorLink } from "../../src/sandbox/link/orchestrator-link.js";
import { RunResolver } from "../../src/sandbox/link/run-resolver.js";
import { silentLogger } from "../../src/shared/logger.js";
import { execute, scope as newScope, startStack, type Stack } from "../helpers/harness.js";
import { sample, scrape } from "../helpers/metrics-scrape.js";

describe("codemode start resolves a run as it is opened", () => {
  let stack: Stack;
  let metricsAt: string;
  beforeAll(async () => {
    stack = await startStack(["--metrics-address", "127.0.0.1:0"]);
    metricsAt = stack.proc.ready.metrics!;
  });
  afterAll(async () => {
    expect(await stack.stop()).toBe(0);
  });

  const lookups = async () => {
    const text = await scrape(metricsAt);
    const of = (result: string) => sample(text, "codemode_run_cache_lookups_total", { result });
    return { hit: of("hit"), miss: of("miss"), joined: of("joined") };
  };

  it("each new run's first exec is served from the cache or waits for the resolve in flight", async () => {
    const before = await lookups();
    const runs = 6;
    for (let i = 0; i < runs; i++) {
      const scope = newScope("prefetch");
      await stack.control.openRun({ scope, catalog: { case: "tools", value: { tools: [] } } });
      const out = await execute({ sandbox: stack.sandbox }, { scope, code: `return ${i}` });
      expect(out.model).toMatchObject({ status: "completed", value: i });
    }
    const after = await lookups();
    // One resolve per run, made as it was opened; every first exec found it.
    expect(after.miss - before.miss).toBe(runs);
    expect(after.hit + after.joined - (before.hit + before.joined)).toBe(runs);
  });
});

describe("resolving one run from several execs at once", () => {
  let orch: RunningOrchestrator;
  let control: ReturnType<typeof createClient<typeof Control.method>>;
  let link: OrchestratorLink;
  beforeAll(async () => {
    orch = await startOrchestrator({ listen: { host: "127.0.0.1", port: 0 }, linkListen: { host: "127.0.0.1", port: 0 }, log: silentLogger() });
    control = createClient(Control, orch.address);
    link = new OrchestratorLink(orch.linkAddress, { sidecarId: "sc-join", address: "127.0.0.1:1", version: "test" }, silentLogger());
    const up = new Promise<void>((resolve) => link.onStateChange((s) => s === "up" && resolve()));
    link.start(() => 0);
    await up;
  });
  afterAll(async () => {
    link.close();
    control.close();
    await orch.close(1_000);
  });

  it("sends one request; the others wait for its answer", async () => {
    const resolver = new RunResolver(link);
    const scope = newScope("join");
    await control.openRun({ scope, catalog: { case: "tools", value: { tools: [] } } });
    const answers = await Promise.all([resolver.resolve(scope), resolver.resolve(scope), resolver.resolve(scope)]);
    expect(resolver.stats).toEqual({ hits: 0, misses: 1, joined: 2 });
    expect(answers[1]).toBe(answers[0]);
    expect(answers[0]!.found).toBe(true);
    // Cached from then on.
    await resolver.resolve(scope);
    expect(resolver.stats).toEqual({ hits: 1, misses: 1, joined: 2 });
  });

  it("does not let a lookup after an invalidation take an answer asked for before it", async () => {
    const resolver = new RunResolver(link);
    const scope = newScope("join");
    await control.openRun({ scope, catalog: { case: "tools", value: { tools: [] } } });
    const first = resolver.resolve(scope);
    // What the link does when the orchestrator pushes a change of this run.
    link.onInvalidate!([scope], false);
    const second = resolver.resolve(scope);
    await Promise.all([first, second]);
    expect(resolver.stats).toEqual({ hits: 0, misses: 2, joined: 0 });
  });
});

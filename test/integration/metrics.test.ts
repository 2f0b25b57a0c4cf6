// Prometheus metrics through real processes: `codemode start`, `sandbox` and
// `orchestrator` with `--metrics-address 127.0.0.1:0` name the port on their ready line,
// serve /metrics there, and their counters move with execs, waits and nested calls; the
// sidecar's link gauge follows its orchestrator going away and coming back.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Sandbox } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { Control } from "../../src/gen/codemode/orchestrator/v1/control_pb.js";
import { createClient } from "../../src/protocol/grpc-client.js";
import { openRun, type TestTool } from "../helpers/gateway.js";
import { spawnSync } from "node:child_process";
import { BIN, execute, spawnCodemode, startStack, waitFor, type Proc, type Stack, type ToolCallEvent } from "../helpers/harness.js";
import { sample, scrape } from "../helpers/metrics-scrape.js";
import { until } from "../helpers/until.js";

const tools: TestTool[] = [{ name: "lookup", description: "Looks something up", parameters: { type: "object", properties: { key: { type: "string" } } } }];

describe("codemode start --metrics-address", () => {
  let stack: Stack;
  let metricsAt: string;
  beforeAll(async () => {
    stack = await startStack(["--metrics-address", "127.0.0.1:0"]);
    metricsAt = stack.proc.ready.metrics!;
  });
  afterAll(async () => {
    expect(await stack?.stop()).toBe(0);
  });

  it("names the metrics port on the ready line, beside the gRPC ports", () => {
    expect(Object.keys(stack.proc.ready).sort()).toEqual(["link", "metrics", "orchestrator", "sandbox"]);
    expect(metricsAt).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(metricsAt.endsWith(":0")).toBe(false);
  });

  it("serves only /metrics, every product metric prefixed codemode_", async () => {
    const text = await scrape(metricsAt);
    const names = new Set(
      text
        .split("\n")
        .filter((l) => l.startsWith("# TYPE "))
        .map((l) => l.split(" ")[2]!),
    );
    expect([...names].filter((n) => !n.startsWith("codemode_"))).toEqual([]);
    for (const n of [
      "codemode_execs_total",
      "codemode_waits_total",
      "codemode_exec_duration_seconds",
      "codemode_wait_duration_seconds",
      "codemode_nested_calls_total",
      "codemode_pool_utilization",
      "codemode_pool_queue_size",
      "codemode_suspended_runs",
      "codemode_snapshot_bytes",
      "codemode_orchestrator_link_up",
      "codemode_process_cpu_seconds_total",
    ]) {
      expect(names.has(n), n).toBe(true);
    }
    expect(sample(text, "codemode_orchestrator_link_up")).toBe(1);
    expect(sample(text, "codemode_pool_threads")).toBeGreaterThan(0);
    expect(sample(text, "codemode_pool_surge_threads")).toBe(0);
    expect(sample(text, "codemode_attached_sidecars")).toBe(1);
    expect((await fetch(`http://${metricsAt}/other`)).status).toBe(404);
  });

  it("counts execs by status and code, a nested call by source and outcome, a suspension, its wait and the snapshot", async () => {
    const before = await scrape(metricsAt);
    const ok = await execute(stack, { code: "return 1 + 1" });
    expect(ok.model.status).toBe("completed");
    const thrown = await execute(stack, { code: "throw new Error('boom')" });
    expect(thrown.model.status).toBe("failed");

    const { scope } = await openRun(stack, tools);
    const nested = await execute(stack, { scope, code: "const r = await tools.lookup({ key: 'a' }); return r" }, (c: ToolCallEvent) => {
      void stack.sandbox.bridgeCallback({ scope, callId: c.callId, outcome: { case: "resultJson", value: '{"v":1}' } });
    });
    expect(nested.model).toMatchObject({ status: "completed", value: { v: 1 } });

    const yielded = await execute(stack, { code: "yield_control('later'); return 'done'" });
    expect(yielded.model.status).toBe("waiting");
    const during = await scrape(metricsAt);
    expect(sample(during, "codemode_suspended_runs")).toBe(sample(before, "codemode_suspended_runs") + 1);

    const after = await scrape(metricsAt);
    const delta = (name: string, labels: Record<string, string> = {}) => sample(after, name, labels) - sample(before, name, labels);
    expect(delta("codemode_execs_total", { status: "completed", code: "ok" })).toBe(2);
    expect(delta("codemode_execs_total", { status: "failed", code: "uncaught" })).toBe(1);
    expect(delta("codemode_execs_total", { status: "waiting", code: "yield" })).toBe(1);
    expect(delta("codemode_exec_duration_seconds_count")).toBe(4);
    expect(delta("codemode_nested_calls_total", { source: "openclaw", outcome: "ok" })).toBe(1);
    expect(delta("codemode_nested_call_duration_seconds_count", { source: "openclaw" })).toBe(1);
    expect(delta("codemode_tool_answers_total", { delivery: "live" })).toBe(1);
    expect(delta("codemode_snapshot_bytes_count")).toBe(1);
    expect(delta("codemode_snapshot_bytes_sum")).toBeGreaterThan(0);
    expect(delta("codemode_store_snapshot_bytes_count")).toBe(1);
    expect(delta("codemode_suspended_run_operations_total", { op: "suspend", outcome: "stored" })).toBe(1);
    expect(delta("codemode_orchestrator_requests_total", { method: "OpenRun", code: "ok" })).toBe(4);
    expect(sample(after, "codemode_segments_in_flight")).toBe(0);
  });

  it("counts a wait that resumes a run, and the run leaving the store", async () => {
    const { scope } = await openRun(stack, tools);
    const yielded = await execute(stack, { scope, code: "yield_control('later'); return 'done'" });
    expect(yielded.model.status).toBe("waiting");
    const before = await scrape(metricsAt);
    const resumed = await waitFor(stack.sandbox, { scope, runId: yielded.model.runId! });
    expect(resumed.model).toMatchObject({ status: "completed", value: "done" });
    const after = await scrape(metricsAt);
    const delta = (name: string, labels: Record<string, string> = {}) => sample(after, name, labels) - sample(before, name, labels);
    expect(delta("codemode_waits_total", { status: "completed", code: "ok" })).toBe(1);
    expect(delta("codemode_wait_duration_seconds_count", { status: "completed" })).toBe(1);
    expect(delta("codemode_suspended_run_operations_total", { op: "claim", outcome: "claimed" })).toBe(1);
    expect(delta("codemode_suspended_run_operations_total", { op: "release", outcome: "settled" })).toBe(1);
    expect(delta("codemode_suspended_runs")).toBe(-1);

    // A refused wait is a result too (the run is gone now).
    const again = await waitFor(stack.sandbox, { scope, runId: yielded.model.runId! });
    expect(again.model).toMatchObject({ status: "failed", code: "invalid_input" });
    const last = await scrape(metricsAt);
    expect(
      sample(last, "codemode_waits_total", { status: "failed", code: "invalid_input" }) -
        sample(after, "codemode_waits_total", { status: "failed", code: "invalid_input" }),
    ).toBe(1);
    expect(sample(last, "codemode_suspended_run_operations_total", { op: "claim", outcome: "unavailable" })).toBeGreaterThanOrEqual(1);
  });

  it("reports the worker threads' memory: V8 heaps, the prepared images and compiler, and a grown instance kept for reuse", async () => {
    const grown = await execute(stack, { code: "const a = []; for (let i = 0; i < 150000; i++) a.push({ i }); return a.length" });
    expect(grown.model).toMatchObject({ status: "completed", value: 150000 });
    // A thread reports with a task's outcome at most once a second: small execs follow until
    // one's outcome brought a report that has the grown instance, kept as a spare, in it.
    const text = await until(
      async () => {
        await execute(stack, { code: "return 1" });
        const t = await scrape(metricsAt);
        return sample(t, "codemode_worker_memory_bytes", { part: "spares" }) >= 4 << 20 && t;
      },
      "a memory report with the grown instance kept as a spare",
      { everyMs: 250 },
    );
    const part = (p: string) => sample(text, "codemode_worker_memory_bytes", { part: p });
    expect(part("heap_total")).toBeGreaterThan(part("heap_used"));
    expect(part("heap_used")).toBeGreaterThan(1 << 20);
    // An image is about 1.4 MB; the instance the run grew (4 MiB or more) is kept as a spare.
    expect(part("images")).toBeGreaterThan(1 << 20);
    expect(part("spares")).toBeGreaterThanOrEqual(4 << 20);
    expect(part("compiler")).toBeGreaterThan(0);
    expect(part("external")).toBeGreaterThanOrEqual(part("spares"));
  });

  it("counts gRPC refusals apart from results", async () => {
    const before = await scrape(metricsAt);
    await expect(
      stack.sandbox.bridgeCallback({
        scope: { agentId: "a", sessionId: "s", sessionKey: "k", agentRunId: "r" },
        callId: "nope",
        outcome: { case: "resultJson", value: "1" },
      }),
    ).rejects.toMatchObject({ code: "not_found" });
    const after = await scrape(metricsAt);
    expect(
      sample(after, "codemode_sandbox_rpc_errors_total", { method: "BridgeCallback", code: "not_found" }) -
        sample(before, "codemode_sandbox_rpc_errors_total", { method: "BridgeCallback", code: "not_found" }),
    ).toBe(1);
    expect(sample(after, "codemode_tool_answers_total", { delivery: "refused" }) - sample(before, "codemode_tool_answers_total", { delivery: "refused" })).toBe(
      1,
    );
  });
});

describe("codemode sandbox and orchestrator, each with --metrics-address", () => {
  let orchestrator: Proc;
  let sidecar: Proc;
  afterAll(async () => {
    await sidecar?.stop();
    await orchestrator?.stop();
  });

  it("each process opens its own metrics port; the link gauge follows the orchestrator going away and coming back", async () => {
    orchestrator = await spawnCodemode([
      "orchestrator",
      "--orchestrator-address",
      "127.0.0.1:0",
      "--link-address",
      "127.0.0.1:0",
      "--metrics-address",
      "127.0.0.1:0",
    ]);
    const orchestratorAt = orchestrator.ready.orchestrator!;
    const linkAt = orchestrator.ready.link!;
    expect(Object.keys(orchestrator.ready).sort()).toEqual(["link", "metrics", "orchestrator"]);
    sidecar = await spawnCodemode([
      "sandbox",
      "--sandbox-address",
      "127.0.0.1:0",
      "--orchestrator-address",
      linkAt,
      "--threads",
      "1",
      "--metrics-address",
      "127.0.0.1:0",
    ]);
    expect(Object.keys(sidecar.ready).sort()).toEqual(["metrics", "sandbox"]);
    const sidecarMetrics = sidecar.ready.metrics!;
    const orchestratorMetrics = orchestrator.ready.metrics!;
    expect(sidecarMetrics).not.toBe(orchestratorMetrics);

    /** The metrics at `address` once `check` holds. */
    const matching = (check: (text: string) => boolean, address: string) => {
      let text = "";
      return until(async () => check((text = await scrape(address))) && text, `metrics at ${address} to match`, { everyMs: 100, detail: () => text });
    };
    await matching((t) => sample(t, "codemode_orchestrator_link_up") === 1, sidecarMetrics);
    const o = await matching((t) => sample(t, "codemode_attached_sidecars") === 1, orchestratorMetrics);
    // The orchestrator's registry has its own metrics, not the sidecar's.
    expect(o).not.toContain("codemode_execs_total");
    expect(await scrape(sidecarMetrics)).not.toContain("codemode_suspended_runs ");

    // An exec through the pair moves the sidecar's counters.
    const control = createClient(Control, orchestratorAt);
    const sandbox = createClient(Sandbox, sidecar.ready.sandbox!);
    try {
      const out = await execute({ sandbox, control }, { code: "return 7" });
      expect(out.model.value).toBe(7);
    } finally {
      control.close();
      sandbox.close();
    }
    expect(sample(await scrape(sidecarMetrics), "codemode_execs_total", { status: "completed" })).toBe(1);

    orchestrator.child.kill("SIGKILL");
    await new Promise((r) => orchestrator.child.once("exit", r));
    const down = await matching((t) => sample(t, "codemode_orchestrator_link_up") === 0, sidecarMetrics);
    expect(sample(down, "codemode_orchestrator_link_changes_total", { state: "down" })).toBeGreaterThanOrEqual(1);
    // Readiness follows the link; liveness (what a kubelet restarts on) does not.
    const health = (service: string) =>
      spawnSync(process.execPath, [BIN, "health", "--address", sidecar.ready.sandbox!, "--service", service], { encoding: "utf8" }).status;
    expect(health("")).toBe(1);
    expect(health("liveness")).toBe(0);

    orchestrator = await spawnCodemode(["orchestrator", "--orchestrator-address", orchestratorAt, "--link-address", linkAt]);
    expect(orchestrator.ready.metrics).toBeUndefined();
    const up = await matching((t) => sample(t, "codemode_orchestrator_link_up") === 1, sidecarMetrics);
    expect(sample(up, "codemode_orchestrator_link_changes_total", { state: "up" })).toBeGreaterThanOrEqual(2);
  });
});

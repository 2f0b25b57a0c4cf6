/**
 * The sidecar's Prometheus metrics, all in one place: execs and waits by status and
 * code, their latency, nested tool calls by source and outcome, gateway answers, snapshot
 * sizes, the pool (utilisation, queue depth, threads, whether it can run code), live calls
 * and the orchestrator link; with a tenants file, each tenant's execs and waits, what it
 * has in flight, its quota refusals and its thread time (labelled by the file's tenant names
 * only). Recorded by ./instrument.ts from what the Sandbox handlers stream (nothing in the
 * exec path itself changes); gauges are read at scrape time.
 */
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { CallRegistry } from "./exec/call-registry.js";
import type { OrchestratorLink } from "./link/orchestrator-link.js";
import type { SandboxPool } from "./pool/pool.js";
import type { RunResolver } from "./link/run-resolver.js";
import type { TenantQuotas } from "./exec/tenant-quotas.js";
import type { Tenants } from "../shared/tenants.js";

export type SegmentKind = "exec" | "wait";

/** Seconds: a trivial exec is a few ms; timeoutMs goes up to 60 s. */
const LATENCY_BUCKETS = [0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** Bytes: a trivial sealed snapshot is ~5 KB; maxSnapshotBytes defaults to 10 MiB. */
const SNAPSHOT_BUCKETS = [1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864];

export class SandboxMetrics {
  private readonly results: Record<SegmentKind, Counter<"status" | "code">>;
  private readonly latency: Record<SegmentKind, Histogram<"status">>;
  private readonly inFlight: Gauge<"kind">;
  private readonly nested: Counter<"source" | "outcome">;
  private readonly nestedLatency: Histogram<"source">;
  private readonly answers: Counter<"delivery">;
  private readonly snapshotBytes: Histogram;
  private readonly rpcErrors: Counter<"method" | "code">;
  private readonly approvals: Counter<"decision">;
  private tenantSegments: Counter<"tenant" | "kind" | "status"> | undefined;

  constructor(registry: Registry, parts: { pool: SandboxPool; link: OrchestratorLink; calls: CallRegistry; resolver: RunResolver }) {
    const registers = [registry];
    const results = (kind: SegmentKind) =>
      new Counter({
        name: `codemode_${kind}s_total`,
        help: `${kind === "exec" ? "Execs" : "Waits"} by result: status completed|waiting|failed; code: the error code of a failed one (uncaught for a guest exception), the reason of a waiting one (pending_tools|yield|approval), ok for completed`,
        labelNames: ["status", "code"],
        registers,
      });
    this.results = { exec: results("exec"), wait: results("wait") };
    const latency = (kind: SegmentKind) =>
      new Histogram({
        name: `codemode_${kind}_duration_seconds`,
        help: `Time from the ${kind} request to its result, by status`,
        labelNames: ["status"],
        buckets: LATENCY_BUCKETS,
        registers,
      });
    this.latency = { exec: latency("exec"), wait: latency("wait") };
    this.inFlight = new Gauge({ name: "codemode_segments_in_flight", help: "Execs and waits being served now", labelNames: ["kind"], registers });
    this.nested = new Counter({
      name: "codemode_nested_calls_total",
      help: "Nested tool calls sent to the gateway, by source (openclaw|mcp|client) and outcome as the segment that made it saw it: ok|error (answered), pending (still unanswered when the run suspended), abandoned (the segment ended without it)",
      labelNames: ["source", "outcome"],
      registers,
    });
    this.nestedLatency = new Histogram({
      name: "codemode_nested_call_duration_seconds",
      help: "From a ToolCallRequested to the gateway's answer reaching this sidecar, by source",
      labelNames: ["source"],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.answers = new Counter({
      name: "codemode_tool_answers_total",
      help: "BridgeCallback answers: delivery live (into a VM on this sidecar), routed (kept with a suspended run at the orchestrator), refused (a gRPC error)",
      labelNames: ["delivery"],
      registers,
    });
    this.snapshotBytes = new Histogram({
      name: "codemode_snapshot_bytes",
      help: "Sealed snapshot size of each exec or wait that ended waiting",
      buckets: SNAPSHOT_BUCKETS,
      registers,
    });
    this.rpcErrors = new Counter({
      name: "codemode_sandbox_rpc_errors_total",
      help: "Sandbox calls answered with a gRPC error (contract violations, draining), by method and status",
      labelNames: ["method", "code"],
      registers,
    });

    this.approvals = new Counter({
      name: "codemode_approvals_total",
      help: "Nested calls a gateway answered approval-pending, counted in each exec or wait that saw them, by decision: pending (still undecided when it ended), approved, denied, expired, required (approvalMode error)",
      labelNames: ["decision"],
      registers,
    });

    const { pool, link, calls, resolver } = parts;
    new Gauge({
      name: "codemode_pool_utilization",
      help: "piscina's utilisation of the worker pool (0-1): share of worker time spent running tasks since start",
      registers,
      collect() {
        this.set(pool.utilization);
      },
    });
    new Gauge({
      name: "codemode_pool_queue_size",
      help: "Tasks waiting for a free slot on a pool worker",
      registers,
      collect() {
        this.set(pool.queueSize);
      },
    });
    new Gauge({
      name: "codemode_pool_threads",
      help: "Worker threads in the pool",
      registers,
      collect() {
        this.set(pool.threads);
      },
    });
    new Gauge({
      name: "codemode_pool_surge_threads",
      help: "Surge threads running beyond --threads while computing guests hold the others",
      registers,
      collect() {
        this.set(pool.extraThreads.surge);
      },
    });
    new Gauge({
      name: "codemode_pool_background_threads",
      help: "Background threads (lower OS priority) running heavy sessions' programs, beyond --threads",
      registers,
      collect() {
        this.set(pool.extraThreads.background);
      },
    });
    new Gauge({
      name: "codemode_worker_memory_bytes",
      help: "The pool's worker threads' memory, summed over each thread's last report (at most a second old): heap_used and heap_total of their V8 heaps, external (array buffers and live QuickJS memories V8 is told of), spares (idle QuickJS instances kept for reuse), images (prepared images and grown variants), compiler (the VM that compiles programs)",
      labelNames: ["part"],
      registers,
      collect() {
        const m = pool.workerMemory;
        for (const [part, bytes] of [
          ["heap_used", m.heapUsed],
          ["heap_total", m.heapTotal],
          ["external", m.external],
          ["spares", m.spares],
          ["images", m.images],
          ["compiler", m.compiler],
        ] as const)
          this.set({ part }, bytes);
      },
    });
    new Gauge({
      name: "codemode_live_tool_calls",
      help: "Nested calls whose VM is live on this sidecar, awaiting the gateway's answer",
      registers,
      collect() {
        this.set(calls.liveCount);
      },
    });
    new Gauge({
      name: "codemode_pool_can_run_code",
      help: "1 while the sidecar's pool can run code (what it reports to the orchestrator), 0 when it cannot: it could not start (--serve-without-pool) or no worker thread can (re)start now",
      registers,
      collect() {
        this.set(link.poolHealth.canRunCode ? 1 : 0);
      },
    });
    new Gauge({
      name: "codemode_orchestrator_link_up",
      help: "1 while the sidecar's link to its orchestrator is up, else 0",
      registers,
      collect() {
        this.set(link.linkState === "up" ? 1 : 0);
      },
    });
    new Counter({
      name: "codemode_vm_starts_total",
      help: "How task VMs started: reused (an idle instance overwritten with a prepared image, or with a resumed or moved run's state), restored (a new instance from a prepared image), fresh (created, prelude run: extensions or per-run context), snapshot (a new instance for a resumed or moved run)",
      labelNames: ["how"],
      registers,
      collect() {
        this.reset();
        for (const [how, n] of Object.entries(pool.vmStarts)) this.inc({ how }, n);
      },
    });
    new Counter({
      name: "codemode_run_cache_lookups_total",
      help: "Resolved-run lookups by result: hit (served from this sidecar's run cache, no orchestrator round trip), miss (resolved at the orchestrator) or joined (waited for a resolve of the same run already in flight)",
      labelNames: ["result"],
      registers,
      collect() {
        this.reset();
        this.inc({ result: "hit" }, resolver.stats.hits);
        this.inc({ result: "miss" }, resolver.stats.misses);
        this.inc({ result: "joined" }, resolver.stats.joined);
      },
    });
    const changes = new Counter({
      name: "codemode_orchestrator_link_changes_total",
      help: "Orchestrator link state changes, by the new state (connecting|up|down|closed)",
      labelNames: ["state"],
      registers,
    });
    link.onStateChange((state) => changes.inc({ state }));
  }

  /** Per-tenant metrics, for a sidecar with a tenants file: labelled with its tenants' names only. */
  watchTenants(registry: Registry, tenants: Tenants, quotas: TenantQuotas, pool: SandboxPool): void {
    const registers = [registry];
    this.tenantSegments = new Counter({
      name: "codemode_tenant_segments_total",
      help: "Execs and waits by tenant, kind (exec|wait) and status: completed|waiting|failed, refused (a gRPC error, a quota's included)",
      labelNames: ["tenant", "kind", "status"],
      registers,
    });
    const refusals = new Counter({
      name: "codemode_tenant_quota_refusals_total",
      help: "Execs and waits this sidecar refused (RESOURCE_EXHAUSTED) by tenant and local quota: maxConcurrentExecs|execsPerSecond",
      labelNames: ["tenant", "quota"],
      registers,
    });
    quotas.onRefused = (tenant, quota) => refusals.inc({ tenant, quota });
    new Gauge({
      name: "codemode_tenant_in_flight",
      help: "Execs and waits in flight on this sidecar, by tenant (what maxConcurrentExecs limits)",
      labelNames: ["tenant"],
      registers,
      collect() {
        for (const tenant of tenants.names) this.set({ tenant }, quotas.running(tenant));
      },
    });
    new Gauge({
      name: "codemode_tenant_thread_seconds",
      help: "Worker thread time each tenant's programs held over the CPU share's window (what weight shares)",
      labelNames: ["tenant"],
      registers,
      collect() {
        for (const tenant of tenants.names) this.set({ tenant }, pool.tenantUsedMs(tenant) / 1000);
      },
    });
  }

  tenantSegmentEnded(tenant: string, kind: SegmentKind, status: string): void {
    this.tenantSegments?.inc({ tenant, kind, status });
  }

  segmentStarted(kind: SegmentKind): void {
    this.inFlight.inc({ kind });
  }

  segmentEnded(kind: SegmentKind, result: { status: string; code: string; seconds: number; snapshotBytes: number } | undefined): void {
    this.inFlight.dec({ kind });
    if (!result) return;
    this.results[kind].inc({ status: result.status, code: result.code });
    this.latency[kind].observe({ status: result.status }, result.seconds);
    if (result.status === "waiting" && result.snapshotBytes > 0) this.snapshotBytes.observe(result.snapshotBytes);
  }

  nestedCallEnded(source: string, outcome: "ok" | "error" | "pending" | "abandoned", seconds: number): void {
    this.nested.inc({ source, outcome });
    if (outcome === "ok" || outcome === "error") this.nestedLatency.observe({ source }, seconds);
  }

  answer(delivery: "live" | "routed" | "refused"): void {
    this.answers.inc({ delivery });
  }

  approval(decision: string): void {
    this.approvals.inc({ decision });
  }

  rpcError(method: string, code: string): void {
    this.rpcErrors.inc({ method, code });
  }
}

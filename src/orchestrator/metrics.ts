/**
 * The orchestrator's Prometheus metrics, all in one place, added around its handlers
 * (nothing inside them changes): requests by method and status, suspended-run store
 * operations by outcome, the size of stored snapshots, and, read at scrape time, the
 * unexpired suspended runs in the store and the sidecars attached to this replica. With a
 * tenants file, each tenant's suspended runs, their bytes, its session stores' bytes and
 * its store quotas' refusals, labelled by the file's tenant names only.
 */
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { ServiceHandlers } from "../protocol/grpc-service.js";
import { ServiceError } from "../protocol/service-error.js";
import { RUN_MESSAGES } from "../shared/link-wire.js";
import type { Logger } from "../shared/logger.js";
import type { TenantStates } from "./tenants/tenant-state.js";
import { OVER_QUOTA } from "./tenants/store-quotas.js";

const SNAPSHOT_BUCKETS = [1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864];
const REFUSALS = new Map<string, string>(Object.entries(RUN_MESSAGES).map(([k, v]) => [v, k]));

type AnyHandler = (...args: unknown[]) => Promise<unknown>;

export class OrchestratorMetrics {
  private readonly requests: Counter<"service" | "method" | "code">;
  private readonly operations: Counter<"op" | "outcome">;
  private readonly snapshotBytes: Histogram;

  constructor(registry: Registry, parts: { states: TenantStates; sidecars: { size: number }; log: Logger }) {
    const registers = [registry];
    this.requests = new Counter({
      name: "codemode_orchestrator_requests_total",
      help: "Unary Control and SidecarLink calls served, by service, method and status (ok or the error code)",
      labelNames: ["service", "method", "code"],
      registers,
    });
    this.operations = new Counter({
      name: "codemode_suspended_run_operations_total",
      help: "Suspended-run store operations by outcome: suspend (stored|cap|quota|claim_lost|snapshot_limit), claim (claimed|unavailable|session|run|busy), release (settled|kept|stale), answer (stored|not_found|permission_denied|already_exists|failed_precondition|...)",
      labelNames: ["op", "outcome"],
      registers,
    });
    this.snapshotBytes = new Histogram({
      name: "codemode_store_snapshot_bytes",
      help: "Size of each sealed snapshot stored (suspend and re-suspend)",
      buckets: SNAPSHOT_BUCKETS,
      registers,
    });
    const { states, sidecars, log } = parts;
    new Gauge({
      name: "codemode_suspended_runs",
      help: "Unexpired suspended runs in the store (shared by every replica on the same Redis)",
      registers,
      async collect() {
        try {
          const counts = await Promise.all(states.all.map((t) => t.store.count()));
          this.set(counts.reduce((a, b) => a + b, 0));
        } catch (err) {
          log.warn({ err }, "could not count suspended runs for metrics");
        }
      },
    });
    new Gauge({
      name: "codemode_attached_sidecars",
      help: "Sidecars whose link is attached to this orchestrator",
      registers,
      collect() {
        this.set(sidecars.size);
      },
    });
  }

  /** Per-tenant metrics, for an orchestrator with a tenants file (read from each tenant's stores at scrape time). */
  watchTenants(registry: Registry, states: TenantStates): void {
    const registers = [registry];
    const refusals = new Counter({
      name: "codemode_tenant_store_quota_refusals_total",
      help: "Suspensions and session-store commits refused for a tenant's quota, by tenant and quota: maxSuspendedRuns|maxSuspendedBytes|maxStoreBytes",
      labelNames: ["tenant", "quota"],
      registers,
    });
    states.quotaRefused = (tenant, quota) => refusals.inc({ tenant, quota });
    const perTenant = (name: string, help: string, read: (t: TenantStates["all"][number]) => Promise<number>) =>
      new Gauge({
        name,
        help,
        labelNames: ["tenant"],
        registers,
        async collect() {
          await Promise.all(
            states.all.map(async (t) => {
              try {
                this.set({ tenant: t.tenant }, await read(t));
              } catch {
                // The store cannot be reached: the gauge keeps its last value (the store's outage is logged elsewhere).
              }
            }),
          );
        },
      });
    perTenant("codemode_tenant_suspended_runs", "Unexpired suspended runs by tenant (what maxSuspendedRuns limits)", (t) => t.store.count());
    perTenant("codemode_tenant_suspended_bytes", "Bytes the unexpired suspended runs hold, by tenant (what maxSuspendedBytes limits)", (t) => t.store.bytes());
    perTenant("codemode_tenant_session_store_bytes", "Bytes of every session store of a tenant together (what maxStoreBytes limits)", (t) =>
      t.sessions.totalBytes(),
    );
  }

  /** Counts every unary call of `service` by its outcome. */
  countRequests<S extends GenServiceMethods>(service: GenService<S>, handlers: Partial<ServiceHandlers<S>>): Partial<ServiceHandlers<S>> {
    const out: Record<string, unknown> = { ...handlers };
    for (const method of service.methods) {
      const h = (handlers as Record<string, AnyHandler | undefined>)[method.localName];
      if (!h || method.methodKind !== "unary") continue;
      const labels = { service: service.typeName, method: method.name };
      out[method.localName] = async (...args: unknown[]) => {
        try {
          const res = await h(...args);
          this.requests.inc({ ...labels, code: "ok" });
          return res;
        } catch (err) {
          this.requests.inc({ ...labels, code: err instanceof ServiceError ? err.code : "internal" });
          throw err;
        }
      };
    }
    return out as Partial<ServiceHandlers<S>>;
  }

  /** Watches the suspended-run methods of SidecarLink for outcomes and snapshot sizes. */
  watchSuspendedRuns<H extends Record<string, unknown>>(handlers: H): H {
    const out: Record<string, unknown> = { ...handlers };
    const wrap = (name: string, onOk: (req: never, res: never) => void, op: string) => {
      const h = handlers[name] as AnyHandler | undefined;
      if (!h) return;
      out[name] = async (req: unknown, ctx: unknown) => {
        try {
          const res = await h(req, ctx);
          onOk(req as never, res as never);
          return res;
        } catch (err) {
          this.operations.inc({ op, outcome: err instanceof ServiceError ? err.code : "internal" });
          throw err;
        }
      };
    };
    wrap(
      "suspendRun",
      (req: { run?: { snapshot: Uint8Array }; checkpoint?: boolean }, res: { refused?: string }) => {
        if (!res.refused) this.snapshotBytes.observe(req.run?.snapshot.byteLength ?? 0);
        const refused = res.refused ? (REFUSALS.get(res.refused) ?? (res.refused.includes(OVER_QUOTA) ? "quota" : "snapshot_limit")) : undefined;
        const op = req.checkpoint ? "checkpoint" : "suspend";
        this.operations.inc({ op, outcome: refused === undefined ? "stored" : refused === "unavailable" ? "claim_lost" : refused });
      },
      "suspend",
    );
    wrap(
      "claimRun",
      (_req, res: { refused?: string }) => this.operations.inc({ op: "claim", outcome: res.refused ? (REFUSALS.get(res.refused) ?? "refused") : "claimed" }),
      "claim",
    );
    wrap(
      "releaseRun",
      (req: { keep: boolean }, res: { released: boolean }) =>
        this.operations.inc({ op: "release", outcome: !res.released ? "stale" : req.keep ? "kept" : "settled" }),
      "release",
    );
    wrap(
      "invalidateRun",
      (_req, res: { invalidated: boolean }) => this.operations.inc({ op: "invalidate", outcome: res.invalidated ? "invalidated" : "stale" }),
      "invalidate",
    );
    wrap("routeToolResult", () => this.operations.inc({ op: "answer", outcome: "stored" }), "answer");
    return out as H;
  }
}

/**
 * The orchestrator's Prometheus metrics, all in one place, added around its handlers
 * (nothing inside them changes): requests by method and status, suspended-run store
 * operations by outcome, the size of stored snapshots, and, read at scrape time, the
 * unexpired suspended runs in the store and the sidecars attached to this replica.
 */
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { ServiceHandlers } from "../protocol/grpc-service.js";
import { ServiceError } from "../protocol/service-error.js";
import { RUN_MESSAGES } from "../shared/link-wire.js";
import type { Logger } from "../shared/logger.js";
import type { RunStore } from "./suspended/run-store.js";

const SNAPSHOT_BUCKETS = [1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864];
const REFUSALS = new Map<string, string>(Object.entries(RUN_MESSAGES).map(([k, v]) => [v, k]));

type AnyHandler = (...args: unknown[]) => Promise<unknown>;

export class OrchestratorMetrics {
  private readonly requests: Counter<"service" | "method" | "code">;
  private readonly operations: Counter<"op" | "outcome">;
  private readonly snapshotBytes: Histogram;

  constructor(registry: Registry, parts: { store: RunStore; sidecars: { size: number }; log: Logger }) {
    const registers = [registry];
    this.requests = new Counter({
      name: "codemode_orchestrator_requests_total",
      help: "Unary Control and SidecarLink calls served, by service, method and status (ok or the error code)",
      labelNames: ["service", "method", "code"],
      registers,
    });
    this.operations = new Counter({
      name: "codemode_suspended_run_operations_total",
      help: "Suspended-run store operations by outcome: suspend (stored|cap|claim_lost|snapshot_limit), claim (claimed|unavailable|session|run|busy), release (settled|kept|stale), answer (stored|not_found|permission_denied|already_exists|failed_precondition|...)",
      labelNames: ["op", "outcome"],
      registers,
    });
    this.snapshotBytes = new Histogram({
      name: "codemode_store_snapshot_bytes",
      help: "Size of each sealed snapshot stored (suspend and re-suspend)",
      buckets: SNAPSHOT_BUCKETS,
      registers,
    });
    const { store, sidecars, log } = parts;
    new Gauge({
      name: "codemode_suspended_runs",
      help: "Unexpired suspended runs in the store (shared by every replica on the same Redis)",
      registers,
      async collect() {
        try {
          this.set(await store.count());
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
      (req: { run?: { snapshot: Uint8Array } }, res: { refused?: string }) => {
        if (!res.refused) this.snapshotBytes.observe(req.run?.snapshot.byteLength ?? 0);
        const refused = res.refused ? (REFUSALS.get(res.refused) ?? "snapshot_limit") : undefined;
        this.operations.inc({ op: "suspend", outcome: refused === undefined ? "stored" : refused === "unavailable" ? "claim_lost" : refused });
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
    wrap("routeToolResult", () => this.operations.inc({ op: "answer", outcome: "stored" }), "answer");
    return out as H;
  }
}

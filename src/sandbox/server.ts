/**
 * Starts a sandbox sidecar: the pool, the link to the orchestrator, the Sandbox gRPC
 * service, gRPC health (SERVING while the orchestrator link is up and the sidecar is not
 * draining) and server reflection. Importable: returns {address, drain(), close()}.
 *
 * Drain (SIGTERM/SIGINT): health goes NOT_SERVING at once and a new Exec is refused,
 * while Wait and BridgeCallback keep being served so runs in flight can finish; when
 * nothing is in flight, or the budget runs out (`drainDeadline`), the server, the link
 * and the pool stop.
 */
import * as grpc from "@grpc/grpc-js";
import { Sandbox } from "../gen/codemode/sandbox/v1/sandbox_pb.js";
import { DEFAULT_DRAIN_MS, DrainTracker } from "../protocol/drain.js";
import { addService, bindServer, shutdownServer } from "../protocol/grpc-service.js";
import { ServingHealth } from "../protocol/health.js";
import { addReflection } from "../protocol/reflection.js";
import { formatHostPort, type HostPort } from "../shared/address.js";
import { newId } from "../shared/ids.js";
import type { Logger } from "../shared/logger.js";
import { CallRegistry } from "./call-registry.js";
import { createSandboxService } from "./exec-service.js";
import { OrchestratorLink } from "./orchestrator-link.js";
import { SandboxPool } from "./pool.js";
import { RunResolver } from "./run-resolver.js";
import { SnapshotSealer, SNAPSHOT_KEY_ENV } from "./snapshot-seal.js";

export type SandboxOptions = {
  listen: HostPort;
  orchestrator: string;
  threads?: number;
  execsPerWorker?: number;
  log: Logger;
  /** Seals snapshots; defaults to the key in CODEMODE_SNAPSHOT_KEY (or a random one). */
  sealer?: SnapshotSealer;
  /** True when no other sidecar shares the orchestrator (no warning about a per-process key). */
  singleSidecar?: boolean;
};

export type RunningSandbox = {
  address: string;
  sidecarId: string;
  /** Health goes NOT_SERVING and new Exec calls are refused, at once; idempotent. */
  startDrain(): void;
  /** Drains (up to `budgetMs` for what is in flight), then stops; idempotent. */
  drain(budgetMs?: number): Promise<void>;
  /** The same as drain. */
  close(budgetMs?: number): Promise<void>;
};

/** After the budget: how long cancelled runs get to send their result. */
const CANCEL_SETTLE_MS = 5_000;
/** After the drain: how long open streams (health watches, reflection) get before they are cut. */
const FINAL_GRACE_MS = 1_000;

export const VERSION = "0.1.0";

export async function startSandbox(options: SandboxOptions): Promise<RunningSandbox> {
  const log = options.log;
  const sidecarId = newId("sc", 6);
  const poolOptions = { log, ...(options.threads !== undefined ? { threads: options.threads } : {}), ...(options.execsPerWorker !== undefined ? { execsPerWorker: options.execsPerWorker } : {}) };
  const pool = await SandboxPool.create(poolOptions);
  const server = new grpc.Server({ "grpc.max_receive_message_length": 16 * 1024 * 1024 });
  const calls = new CallRegistry();
  const port = await bindServer(server, options.listen.host, options.listen.port);
  const address = formatHostPort({ host: options.listen.host, port });
  const link = new OrchestratorLink(options.orchestrator, { sidecarId, address, version: VERSION }, log.child({ sidecarId }));
  const resolver = new RunResolver(link);
  const sealer = options.sealer ?? SnapshotSealer.fromEnv();
  if (!sealer.shared && !options.singleSidecar) {
    log.warn({ sidecarId }, `${SNAPSHOT_KEY_ENV} is not set: runs suspended here can be resumed only by this sidecar process; set the same key on every sidecar so any replica can serve wait`);
  }
  const drain = new DrainTracker();
  const health = new ServingHealth([Sandbox.typeName]);
  const refreshHealth = () => health.set(link.linkState === "up" && !drain.draining);
  link.onStateChange(refreshHealth);
  health.addToServer(server);
  addReflection(server, [Sandbox]);
  const service = createSandboxService({ pool, resolver, calls, link, sealer, log: log.child({ sidecarId }), drain });
  addService(server, Sandbox, service.handlers, log, drain);
  link.start(() => calls.liveCount);
  log.info({ address, sidecarId, threads: pool.threads, orchestrator: options.orchestrator }, "sandbox listening");

  /**
   * The drain budget ran out with execs or waits still running: they are cancelled (each
   * gets a `failed` result). The one place to change what happens to them instead, e.g.
   * suspend them into the store and return them as `waiting`.
   */
  const drainDeadline = () => service.cancelInFlight("this sidecar is shutting down and its drain budget ran out");

  const startDrain = () => {
    if (!drain.begin()) return;
    refreshHealth();
    log.info({ sidecarId, inFlight: drain.inFlight }, "draining: health NOT_SERVING, new execs refused");
  };
  let stopped: Promise<void> | undefined;
  const stop = (budgetMs: number) =>
    (stopped ??= (async () => {
      startDrain();
      if (!(await drain.idle(budgetMs))) {
        log.warn({ sidecarId, inFlight: drain.inFlight, budgetMs }, "drain budget ran out; cancelling what is still running");
        drainDeadline();
        await drain.idle(CANCEL_SETTLE_MS);
      }
      await shutdownServer(server, FINAL_GRACE_MS);
      link.close();
      await pool.close();
      log.info({ sidecarId }, "sandbox stopped");
    })());
  return { address, sidecarId, startDrain, drain: (budgetMs = DEFAULT_DRAIN_MS) => stop(budgetMs), close: (budgetMs = DEFAULT_DRAIN_MS) => stop(budgetMs) };
}

/**
 * Starts a sandbox sidecar: the pool, the link to the orchestrator, and the Sandbox
 * gRPC service. Importable: returns {address, close()}; close drains running execs
 * (up to the grace period) before stopping the pool.
 */
import * as grpc from "@grpc/grpc-js";
import { Sandbox } from "../gen/codemode/sandbox/v1/sandbox_pb.js";
import { addService, bindServer, shutdownServer } from "../protocol/grpc-service.js";
import { formatHostPort, type HostPort } from "../shared/address.js";
import { newId } from "../shared/ids.js";
import type { Logger } from "../shared/logger.js";
import { CallRegistry } from "./call-registry.js";
import { sandboxHandlers } from "./exec-service.js";
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

export type RunningSandbox = { address: string; sidecarId: string; close(graceMs?: number): Promise<void> };

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
  addService(server, Sandbox, sandboxHandlers({ pool, resolver, calls, link, sealer, log: log.child({ sidecarId }) }), log);
  link.start(() => calls.liveCount);
  log.info({ address, sidecarId, threads: pool.threads, orchestrator: options.orchestrator }, "sandbox listening");
  return {
    address,
    sidecarId,
    async close(graceMs = 10_000) {
      await shutdownServer(server, graceMs);
      link.close();
      await pool.close();
      log.info({ sidecarId }, "sandbox stopped");
    },
  };
}

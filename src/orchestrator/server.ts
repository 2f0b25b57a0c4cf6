/**
 * Starts the orchestrator: the Control service for gateways and the SidecarLink
 * service for sidecars, on one gRPC server, with its suspended-run store, catalogs and
 * open runs (in memory, or all in Redis when `store` is a redis:// URL, so replicas
 * share them and a restart keeps them). Importable: returns {address, close()}.
 */
import * as grpc from "@grpc/grpc-js";
import { Control } from "../gen/codemode/orchestrator/v1/control_pb.js";
import { SidecarLink } from "../gen/codemode/orchestrator/v1/link_pb.js";
import { addService, bindServer, shutdownServer } from "../protocol/grpc-service.js";
import { formatHostPort, type HostPort } from "../shared/address.js";
import { newId } from "../shared/ids.js";
import type { Logger } from "../shared/logger.js";
import { controlHandlers } from "./control-service.js";
import { linkHandlers, type AttachedSidecar } from "./link-service.js";
import { createOrchestratorState } from "./state/create-state.js";
import { createRunStore } from "./store/create-store.js";
import { suspendedRunHandlers } from "./suspended-runs.js";

export type OrchestratorOptions = {
  listen: HostPort;
  log: Logger;
  /** "memory" (default) or a redis:// URL. */
  store?: string;
  /** Cap on unexpired suspended runs (64 by default). */
  maxSuspendedRuns?: number;
};

export const DEFAULT_MAX_SUSPENDED_RUNS = 64;

export type RunningOrchestrator = { address: string; close(graceMs?: number): Promise<void> };

export async function startOrchestrator(options: OrchestratorOptions): Promise<RunningOrchestrator> {
  const log = options.log;
  const orchestratorId = newId("orch", 6);
  const sidecars = new Map<string, AttachedSidecar>();
  const store = await createRunStore(options.store, log);
  const state = await createOrchestratorState(options.store, log).catch(async (err: unknown) => {
    await store.close();
    throw err;
  });
  const { catalogs, runs } = state;
  const maxSuspendedRuns = options.maxSuspendedRuns ?? DEFAULT_MAX_SUSPENDED_RUNS;
  const server = new grpc.Server({ "grpc.max_receive_message_length": 64 * 1024 * 1024 });
  addService(server, Control, controlHandlers({ catalogs, runs, store, log }), log);
  addService(server, SidecarLink, { ...linkHandlers({ runs, orchestratorId, log, sidecars }), ...suspendedRunHandlers({ store, maxSuspendedRuns, log }) }, log);
  const closeStores = () => Promise.all([store.close(), state.close()]);
  const port = await bindServer(server, options.listen.host, options.listen.port).catch(async (err: unknown) => {
    await closeStores();
    throw err;
  });
  const address = formatHostPort({ host: options.listen.host, port });
  log.info({ address, orchestratorId, store: store.kind, maxSuspendedRuns }, "orchestrator listening");
  return {
    address,
    async close(graceMs = 5000) {
      await shutdownServer(server, graceMs);
      await closeStores();
      log.info("orchestrator stopped");
    },
  };
}

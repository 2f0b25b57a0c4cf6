/**
 * Starts the orchestrator: the Control service for gateways and the SidecarLink
 * service for sidecars, on one gRPC server. Importable: returns {address, close()}.
 */
import * as grpc from "@grpc/grpc-js";
import { Control } from "../gen/codemode/orchestrator/v1/control_pb.js";
import { SidecarLink } from "../gen/codemode/orchestrator/v1/link_pb.js";
import { addService, bindServer, shutdownServer } from "../protocol/grpc-service.js";
import { formatHostPort, type HostPort } from "../shared/address.js";
import { newId } from "../shared/ids.js";
import type { Logger } from "../shared/logger.js";
import { CatalogStore } from "./catalog/catalog-store.js";
import { controlHandlers } from "./control-service.js";
import { linkHandlers, type AttachedSidecar } from "./link-service.js";
import { RunRegistry } from "./runs.js";

export type OrchestratorOptions = { listen: HostPort; log: Logger };

export type RunningOrchestrator = { address: string; close(graceMs?: number): Promise<void> };

export async function startOrchestrator(options: OrchestratorOptions): Promise<RunningOrchestrator> {
  const log = options.log;
  const orchestratorId = newId("orch", 6);
  const catalogs = new CatalogStore();
  const runs = new RunRegistry();
  const sidecars = new Map<string, AttachedSidecar>();
  const server = new grpc.Server({ "grpc.max_receive_message_length": 64 * 1024 * 1024 });
  addService(server, Control, controlHandlers({ catalogs, runs, log }), log);
  addService(server, SidecarLink, linkHandlers({ runs, orchestratorId, log, sidecars }), log);
  const port = await bindServer(server, options.listen.host, options.listen.port);
  const address = formatHostPort({ host: options.listen.host, port });
  log.info({ address, orchestratorId }, "orchestrator listening");
  return {
    address,
    async close(graceMs = 5000) {
      await shutdownServer(server, graceMs);
      log.info("orchestrator stopped");
    },
  };
}

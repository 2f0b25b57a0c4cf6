/**
 * The Control service in this process, with no port: the handlers `codemode start` serves
 * (./control-service.ts) over fresh in-memory state, called through a local client that
 * encodes and decodes every message as gRPC would. For a command that wants the answer a
 * running service would give without one (`codemode surface` with no `--orchestrator`).
 * It shares nothing with any running service, attaches no sidecar, and its state is gone
 * on close().
 */
import { Control } from "../gen/codemode/orchestrator/v1/control_pb.js";
import { localClient, type LocalClient } from "../protocol/local-client.js";
import type { Logger } from "../shared/logger.js";
import { controlHandlers } from "./control-service.js";
import { RunCachePush } from "./link/run-cache-push.js";
import { SidecarPools } from "./link/sidecar-pools.js";
import { RunNamespaces } from "./namespaces/run-namespaces.js";
import { createOrchestratorState } from "./state/create-state.js";
import { createRunStore } from "./state/create-store.js";

export type InProcessControl = { control: LocalClient<typeof Control.method>; close(): Promise<void> };

export async function startInProcessControl(log: Logger): Promise<InProcessControl> {
  const store = await createRunStore(undefined, log);
  const state = await createOrchestratorState(undefined, log);
  const handlers = controlHandlers({
    catalogs: state.catalogs,
    runs: state.runs,
    store,
    namespaces: new RunNamespaces(state.namespaces),
    log,
    // As `codemode start`'s in-memory orchestrator: it owns the run state.
    cache: new RunCachePush(),
    pools: new SidecarPools(log),
    sessions: state.sessions,
  });
  return {
    control: localClient(Control, handlers),
    close: async () => {
      await Promise.all([store.close(), state.close()]);
    },
  };
}

/**
 * The gateway-facing Control service: PutCatalog, OpenRun, DescribeSurface,
 * GetTrajectory, CloseRun. Config errors and unknown catalogs are INVALID_ARGUMENT /
 * NOT_FOUND with the key and value named; nothing is half-applied. A store that cannot
 * be reached is UNAVAILABLE.
 */
import type { Control } from "../gen/codemode/orchestrator/v1/control_pb.js";
import type { ServiceHandlers } from "../protocol/grpc-service.js";
import { ServiceError } from "../protocol/service-error.js";
import { ConfigError, parseCodeModeConfig } from "../shared/config.js";
import { configLayerFromWire } from "../shared/config-wire.js";
import type { Logger } from "../shared/logger.js";
import { requireScope } from "../shared/scope.js";
import { buildView, sourceCounts, viewVersion } from "./catalog/catalog-view.js";
import type { CatalogStore, StoredCatalog } from "./catalog/catalog-store.js";
import { describeSurface } from "./surface.js";
import type { RunRegistry, RunSpec } from "./runs.js";
import { storeCall } from "./state/store-failure.js";
import type { RunStore } from "./store/run-store.js";


export function surfaceOf(run: RunSpec) {
  const config = parseCodeModeConfig(run.config);
  const s = describeSurface(config, run.view, run.disableTools);
  const counts = sourceCounts(run.view);
  return {
    codeModeActive: s.active,
    inactiveReason: s.inactiveReason,
    tools: s.tools.map((t) => ({ name: t.name, description: t.description, inputSchemaJson: JSON.stringify(t.inputSchema) })),
    toolsJson: s.toolsJson,
    serializedBytes: s.serializedBytes,
    catalogSize: run.view.length,
    sources: { openclaw: counts.core, mcp: counts.mcp, client: counts.client },
  };
}

export function controlHandlers(deps: { catalogs: CatalogStore; runs: RunRegistry; store: RunStore; log: Logger }): ServiceHandlers<typeof Control.method> {
  const { catalogs, runs, log } = deps;
  return {
    async putCatalog(req) {
      const { id, tools } = await catalogs.put(req.tools);
      return { catalogId: id, toolCount: tools.length };
    },
    async openRun(req) {
      const scope = requireScope(req.scope);
      const layer = configLayerFromWire(req.config);
      let config;
      try {
        config = parseCodeModeConfig(layer);
      } catch (err) {
        if (err instanceof ConfigError) throw new ServiceError("invalid_argument", `config: ${err.message}`);
        throw err;
      }
      let catalog: StoredCatalog;
      if (req.catalog.case === "catalogId") {
        const id = req.catalog.value;
        const tools = await catalogs.get(id);
        if (!tools) throw new ServiceError("not_found", `catalog ${id} is not stored; send it with PutCatalog first`);
        catalog = { id, tools };
      } else {
        catalog = await catalogs.put(req.catalog.value?.tools ?? []);
      }
      const rules = { allow: [...(req.policy?.allow ?? [])], deny: [...(req.policy?.deny ?? [])], allowNone: req.policy?.allowNone ?? false };
      const view = buildView(catalog.tools, rules, config.coreSourceName);
      const run: RunSpec = {
        scope,
        catalogId: catalog.id,
        rules,
        config: layer,
        disableTools: req.disableTools,
        view,
        viewVersion: viewVersion(catalog.id, rules, config.coreSourceName),
        openedAtMs: Date.now(),
      };
      await runs.open(run);
      log.info({ runId: scope.runId, sessionId: scope.sessionId, catalogId: catalog.id, visible: view.length }, "run opened");
      return { catalogId: catalog.id, surface: surfaceOf(run) };
    },
    async describeSurface(req) {
      const scope = requireScope(req.scope);
      const run = await runs.get(scope);
      if (!run) throw new ServiceError("not_found", "no run is open for this scope; call OpenRun first");
      return { surface: surfaceOf(run) };
    },
    async getTrajectory(req) {
      const scope = requireScope(req.scope);
      const steps = await runs.trajectory(scope);
      if (!steps) throw new ServiceError("not_found", "no run is open for this scope");
      return { steps: steps.map((s) => ({ ...s, startedAtMs: BigInt(s.startedAtMs), nestedCalls: s.nestedCalls.map((n) => ({ ...n, startedAtMs: BigInt(n.startedAtMs) })) })) };
    },
    async closeRun(req) {
      const scope = requireScope(req.scope);
      await runs.close(scope);
      const deleted = await storeCall(log, "delete the run's suspended runs", () => deps.store.deleteScope(scope));
      if (deleted > 0) log.info({ runId: scope.runId, deleted }, "run closed; its suspended runs were deleted");
      return { suspendedRunsDeleted: deleted };
    },
  };
}

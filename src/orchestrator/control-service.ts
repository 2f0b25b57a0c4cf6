/**
 * The gateway-facing Control service: PutCatalog, OpenRun, DescribeSurface,
 * GetTrajectory, CloseRun, and the namespace registry (RegisterNamespace,
 * ClearNamespaces, ListNamespaces). Config errors and unknown catalogs are
 * INVALID_ARGUMENT / NOT_FOUND with the key and value named; nothing is half-applied. A
 * store that cannot be reached is UNAVAILABLE.
 *
 * The surface OpenRun and DescribeSurface give the model is the run's, except that a
 * Tool Search run in mode code is described in mode tools while no attached sidecar can
 * run code (./link/sidecar-pools.ts); each run's trajectory and the log note when that starts
 * and ends for it. (ResolveRun, the sidecars' view, is not changed by it: a sidecar sent
 * a tool_search_code program runs it if its pool can, and the run's own fallback applies
 * if it cannot.) One set of handlers serves one tenant, over its stores (./tenants/):
 * every scope it takes is that tenant's, whatever the request says.
 */
import type { Control } from "../gen/codemode/orchestrator/v1/control_pb.js";
import type { ServiceHandlers } from "../protocol/grpc-service.js";
import { ServiceError } from "../protocol/service-error.js";
import { SurfaceKind, type RunScope } from "../gen/codemode/common/v1/common_pb.js";
import { ConfigError, parseCodeModeConfig, parseToolSearchConfig } from "../shared/config.js";
import { configLayerFromWire, toolSearchLayerFromWire } from "../shared/config-wire.js";
import { mcpRunLayerFromWire, parseMcpRunConfig } from "../shared/mcp-run/config.js";
import type { Logger } from "../shared/logger.js";
import { checkIdLength } from "../shared/request-limits.js";
import { DEFAULT_TENANT, NO_OPEN_RUN, requireScope, withTenant, type Scope } from "../shared/scope.js";
import { buildView, sourceCounts, viewVersion } from "./catalog/catalog-view.js";
import type { CatalogStore, StoredCatalog } from "./catalog/catalog-store.js";
import { describeSurface } from "./surface.js";
import { replayControlHandlers } from "./replay/replay-handlers.js";
import { MemoryReplayRecords, type ReplayRecords } from "./replay/replay-records.js";
import type { OpenRun, RunRegistry, RunSpec } from "./runs/runs.js";
import type { SidecarPools } from "./link/sidecar-pools.js";
import { checkRegistration } from "./namespaces/namespace-rules.js";
import type { RunNamespaces, RunNamespaceView } from "./namespaces/run-namespaces.js";
import { storeCall } from "./state/store-failure.js";
import type { RunStore } from "./suspended/run-store.js";
import type { RunCachePush } from "./link/run-cache-push.js";
import { sessionControlHandlers } from "./sessions/session-handlers.js";
import type { SessionStore } from "./sessions/session-store.js";

const KIND_ENUM = {
  code_mode: SurfaceKind.CODE_MODE,
  tool_search_code: SurfaceKind.TOOL_SEARCH_CODE,
  tool_search: SurfaceKind.TOOL_SEARCH_TOOLS,
  direct: SurfaceKind.DIRECT,
  none: SurfaceKind.NONE,
  mcp_run: SurfaceKind.MCP_RUN,
} as const;

/**
 * The run's surface (the model's tools, and what the sidecars run). `poolFallback`: why
 * no attached sidecar can run code, for the surface the model is given (Tool Search mode
 * code then falls back to mode tools); the run's own fallback, if any, comes first.
 */
export function surfaceOf(run: RunSpec, namespaces: RunNamespaceView, poolFallback = "") {
  const config = parseCodeModeConfig(run.config);
  const s = describeSurface(config, run.view, run.disableTools, {
    namespaces: namespaces.visible,
    mcpServerCount: run.mcpServers?.length ?? 0,
    emptyCatalog: run.catalogToolCount === 0,
    toolSearch: parseToolSearchConfig(run.toolSearch),
    codeModeExplicit: run.config.enabled === true,
    ...(run.fallbackReason || poolFallback ? { fallbackReason: run.fallbackReason || poolFallback } : {}),
    mcpRun: parseMcpRunConfig(run.mcpRun),
    mcpServers: run.mcpServers ?? [],
    viewVersion: run.viewVersion,
  });
  const counts = sourceCounts(run.view);
  return {
    codeModeActive: s.active,
    inactiveReason: s.inactiveReason,
    tools: s.tools.map((t) => ({ name: t.name, description: t.description, inputSchemaJson: JSON.stringify(t.inputSchema), toolId: t.toolId ?? "" })),
    toolsJson: s.toolsJson,
    serializedBytes: s.serializedBytes,
    catalogSize: run.view.length,
    sources: { openclaw: counts.core, mcp: counts.mcp, client: counts.client },
    namespaces: s.active ? namespaces.visible.map((n) => n.globalName) : [],
    kind: KIND_ENUM[s.kind],
    fallback: s.fallbackReason !== "",
    fallbackReason: s.fallbackReason,
  };
}

/** The run state the trajectory notes the pool-health fallback by ("tools" while it applies, "" otherwise). */
const POOL_FALLBACK_STATE = "poolFallback";

export function controlHandlers(deps: {
  catalogs: CatalogStore;
  runs: RunRegistry;
  store: RunStore;
  namespaces: RunNamespaces;
  log: Logger;
  cache: RunCachePush;
  pools: SidecarPools;
  /** Code mode's session stores (GetSessionStore, ClearSessionStore). */
  sessions: SessionStore;
  /** Told of each run opened, before the gateway hears back (a sidecar in this process resolves it ahead of its first exec). */
  opened?: (scope: Scope) => void;
  /** The tenant these handlers serve (the default tenant when absent). */
  tenant?: string;
  /** Code-mode runs' replay records (GetReplayRecord, ReplayRun); none kept without it. */
  replays?: ReplayRecords;
}): ServiceHandlers<typeof Control.method> {
  const { catalogs, runs, log, namespaces, cache, pools } = deps;
  const tenant = deps.tenant ?? DEFAULT_TENANT;
  /** The request's scope, as this tenant's. */
  const scopeOf = (s: RunScope | undefined) => withTenant(requireScope(s), tenant);
  /**
   * The surface the model is given now. For a Tool Search run in mode code (without a
   * fallback of its own), a change between mode code and the pool-health fallback is
   * noted once in its trajectory (a `tool_search_fallback` step) and in the log.
   */
  const modelSurface = async (run: RunSpec | OpenRun) => {
    const surface = surfaceOf(run, await namespaces.forRun(run), pools.fallbackReason());
    const ts = parseToolSearchConfig(run.toolSearch);
    const ownSurface = surface.kind === SurfaceKind.TOOL_SEARCH_CODE || surface.kind === SurfaceKind.TOOL_SEARCH_TOOLS;
    if (!ownSurface || ts.mode !== "code" || run.fallbackReason) return surface;
    const fellBack = surface.fallback;
    const step = {
      kind: "tool_search_fallback",
      callId: "",
      codeModeRunId: "",
      status: fellBack ? "fallback" : "restored",
      errorCode: fellBack ? "runtime_unavailable" : "",
      errorMessage: fellBack ? surface.fallbackReason : "",
      startedAtMs: Date.now(),
      durationMs: 0,
      nestedCalls: [],
    };
    const scope = run.scope;
    if (await runs.recordChange(scope, POOL_FALLBACK_STATE, fellBack ? "tools" : "", step)) {
      if (fellBack)
        log.warn(
          { agentRunId: scope.agentRunId, reason: surface.fallbackReason },
          "Tool Search falls back from mode code to mode tools for the run: no attached sidecar can run code",
        );
      else log.info({ agentRunId: scope.agentRunId }, "Tool Search is back in mode code for the run: an attached sidecar can run code");
    }
    return surface;
  };
  return {
    ...sessionControlHandlers(deps.sessions, log, tenant),
    ...replayControlHandlers(deps.replays ?? new MemoryReplayRecords(), log, scopeOf),
    async putCatalog(req) {
      const { id, tools } = await catalogs.put(req.tools, req.mcpServers);
      return { catalogId: id, toolCount: tools.length };
    },
    async openRun(req) {
      const scope = scopeOf(req.scope);
      const layer = configLayerFromWire(req.config);
      const toolSearch = toolSearchLayerFromWire(req.toolSearch);
      const mcpRun = mcpRunLayerFromWire(req.mcpRun);
      let config;
      try {
        config = parseCodeModeConfig(layer);
        parseToolSearchConfig(toolSearch);
        parseMcpRunConfig(mcpRun);
      } catch (err) {
        if (err instanceof ConfigError) throw new ServiceError("invalid_argument", `config: ${err.message}`);
        throw err;
      }
      let catalog: StoredCatalog;
      if (req.catalog.case === "catalogId") {
        const id = req.catalog.value;
        checkIdLength("catalog_id", id);
        const stored = await catalogs.get(id);
        if (!stored) throw new ServiceError("not_found", `catalog ${id} is not stored; send it with PutCatalog first`);
        catalog = stored;
      } else {
        catalog = await catalogs.put(req.catalog.value?.tools ?? [], req.catalog.value?.mcpServers ?? []);
      }
      const rules = { allow: [...(req.policy?.allow ?? [])], deny: [...(req.policy?.deny ?? [])], allowNone: req.policy?.allowNone ?? false };
      const { entries: view, servers } = buildView(catalog, rules, config.coreSourceName);
      const run: RunSpec = {
        scope,
        catalogId: catalog.id,
        rules,
        config: layer,
        disableTools: req.disableTools,
        view,
        mcpServers: servers,
        catalogToolCount: catalog.tools.length,
        viewVersion: viewVersion(catalog.id, rules, config.coreSourceName),
        openedAtMs: Date.now(),
        ...(req.toolSearch ? { toolSearch } : {}),
        ...(req.mcpRun ? { mcpRun } : {}),
      };
      await runs.open(run).catch(cache.failedWrite(scope));
      // Sidecars that cached the run's previous opening drop it before the gateway hears back.
      await cache.invalidate(scope);
      log.info({ agentRunId: scope.agentRunId, sessionId: scope.sessionId, catalogId: catalog.id, visible: view.length }, "run opened");
      deps.opened?.(scope);
      return { catalogId: catalog.id, surface: await modelSurface(run) };
    },
    async describeSurface(req) {
      const scope = scopeOf(req.scope);
      const run = await runs.get(scope);
      if (!run) throw new ServiceError("not_found", NO_OPEN_RUN);
      return { surface: await modelSurface(run) };
    },
    async getTrajectory(req) {
      const scope = scopeOf(req.scope);
      const steps = await runs.trajectory(scope);
      if (!steps) throw new ServiceError("not_found", "no run is open for this scope");
      const replay = (r: { text: string; bytes: number; sha256: string }) => ({ ...r, bytes: BigInt(r.bytes) });
      return {
        steps: steps.map(({ input, result, ...s }) => ({
          ...s,
          ...(input ? { input: replay(input) } : {}),
          ...(result ? { result: replay(result) } : {}),
          startedAtMs: BigInt(s.startedAtMs),
          sessionBytesWritten: BigInt(s.sessionBytesWritten ?? 0),
          nestedCalls: s.nestedCalls.map((n) => ({
            ...n,
            startedAtMs: BigInt(n.startedAtMs),
            approvalRequestedAtMs: BigInt(n.approvalRequestedAtMs ?? 0),
            approvalDecidedAtMs: BigInt(n.approvalDecidedAtMs ?? 0),
          })),
        })),
      };
    },
    async closeRun(req) {
      const scope = scopeOf(req.scope);
      await runs.close(scope).catch(cache.failedWrite(scope));
      await cache.invalidate(scope);
      const deleted = await storeCall(log, "delete the run's suspended runs", () => deps.store.deleteScope(scope));
      if (deleted > 0) log.info({ agentRunId: scope.agentRunId, deleted }, "run closed; its suspended runs were deleted");
      return { suspendedRunsDeleted: deleted };
    },
    async registerNamespace(req) {
      const ns = checkRegistration(req.namespace);
      // The registry is this tenant's: only its runs can see the change, so only they are dropped.
      const { replaced } = await namespaces.registry.register(ns).catch(cache.failedWrite({ tenant }));
      await cache.invalidate({ tenant });
      log.info({ namespace: ns.id, pluginId: ns.pluginId, globalName: ns.globalName, callables: ns.callableCount, replaced }, "namespace registered");
      return { callableCount: ns.callableCount, replaced };
    },
    async clearNamespaces(req) {
      const cleared = await namespaces.registry.clear(req.pluginId).catch(cache.failedWrite({ tenant }));
      if (cleared > 0) await cache.invalidate({ tenant });
      if (cleared > 0) log.info({ pluginId: req.pluginId, cleared }, "plugin namespaces cleared");
      return { cleared };
    },
    async listNamespaces() {
      const snap = await namespaces.registry.snapshot();
      return { namespaces: snap.namespaces.map(({ callableCount: _c, ...ns }) => ns) };
    },
  };
}

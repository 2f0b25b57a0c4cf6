/**
 * Resolves a scope to its run at the orchestrator (config layer, catalog view,
 * counters) and keeps catalog views by version, so a catalog crosses the link once per
 * change. A scope with no open run resolves as `found: false` (Exec and Wait refuse it).
 *
 * When the orchestrator allows it (`cacheable`: it hears of every change of the run), the
 * resolved run is cached until the orchestrator pushes an invalidation for it (opened again,
 * closed, namespaces changed, counters moved elsewhere), and an answer that crossed one is
 * not cached; this sidecar's own segments update the cached counters as they are recorded.
 * A push that says the runs did not change (counters moved, or the orchestrator may miss
 * changes from now on) keeps what was cached as the fallback for a store outage: served only
 * while the orchestrator answers that its store cannot be reached (no run changes then), so
 * plain execs of open runs go on through one. A change of the run, or a link that leaves
 * `up` (the orchestrator then forgets what this sidecar holds), drops both.
 */
import { LRUCache } from "lru-cache";
import { SurfaceKind, ToolSource, type ToolCallers } from "../../gen/codemode/common/v1/common_pb.js";
import { annotationsFromWire, callerRuleFromWire, type CallerRule } from "../../shared/tool-wire.js";
import type { RecordSegmentRequestSchema } from "../../gen/codemode/orchestrator/v1/link_pb.js";
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { CodeModeConfigInput } from "../../shared/config.js";
import { DEFAULT_TENANT, scopeKeyOf, tenantOfScope, type Scope } from "../../shared/scope.js";
import { configLayerFromWire, toolSearchLayerFromWire } from "../../shared/config-wire.js";
import { parseToolSearchConfig, type ToolSearchConfig } from "../../shared/config.js";
import type { Logger } from "../../shared/logger.js";
import { mcpRunLayerFromWire, parseMcpRunConfig, type McpRunConfig } from "../../shared/mcp-run/config.js";
import { RunCatalog } from "../catalog/run-catalog.js";
import type { OrchestratorLink } from "./orchestrator-link.js";
import { isStoreUnavailable } from "../../shared/store-errors.js";

/** The run's model-visible surface, as the orchestrator decided it (see SurfaceKind). */
export type RunSurface = "code_mode" | "tool_search_code" | "tool_search" | "direct" | "none" | "mcp_run";

export type ResolvedRun = {
  found: boolean;
  /** Code mode is active (exec/wait). */
  active: boolean;
  surface: RunSurface;
  /** The run's Tool Search config (defaults when it has none). */
  toolSearch: ToolSearchConfig;
  /** The run's Code Mode for MCP config (defaults when it has none). */
  mcpRun: McpRunConfig;
  inactiveReason: string;
  configLayer: Partial<CodeModeConfigInput> | undefined;
  catalog: RunCatalog | undefined;
  counters: { search: number; describe: number; call: number };
};

const SOURCE_NAME = {
  [ToolSource.UNSPECIFIED]: "openclaw",
  [ToolSource.OPENCLAW]: "openclaw",
  [ToolSource.MCP]: "mcp",
  [ToolSource.CLIENT]: "client",
} as const;
const MAX_VIEWS = 256;
const SURFACES: Record<number, RunSurface | undefined> = {
  [SurfaceKind.CODE_MODE]: "code_mode",
  [SurfaceKind.TOOL_SEARCH_CODE]: "tool_search_code",
  [SurfaceKind.TOOL_SEARCH_TOOLS]: "tool_search",
  [SurfaceKind.DIRECT]: "direct",
  [SurfaceKind.NONE]: "none",
  [SurfaceKind.MCP_RUN]: "mcp_run",
};

const RESOLVE_DEADLINE_MS = 5_000;

/** Resolved runs cached at most. */
const MAX_CACHED_RUNS = 10_000;
/**
 * A cached run (and the catalog version its scope last had) unused this long is dropped:
 * the cache holds the runs in recent use, not every run this sidecar ever served (a
 * returning run costs one ResolveRun). Without it the cache grew with every new agent
 * run until its count bound, about 1 MiB a minute of heap at 3 new runs a second.
 */
const CACHED_RUN_IDLE_MS = 5 * 60_000;
/** An entry's allowed callers from the link; a value this build does not know keeps the tool away from programs. */
function callerRuleOf(v: ToolCallers): { allowedCallers?: CallerRule } {
  const rule = callerRuleFromWire(v);
  return rule === undefined ? {} : { allowedCallers: rule ?? "model" };
}

/** How often expired entries are swept (lru-cache drops them lazily otherwise). */
const PURGE_EVERY_MS = 30_000;

export class RunResolver {
  private readonly views = new Map<string, RunCatalog>();
  private readonly lastVersion = new LRUCache<string, string>({ max: MAX_CACHED_RUNS, ttl: 2 * CACHED_RUN_IDLE_MS, updateAgeOnGet: true });
  private readonly cached = new LRUCache<string, ResolvedRun>({ max: MAX_CACHED_RUNS, ttl: CACHED_RUN_IDLE_MS, updateAgeOnGet: true });
  /** Bumped by every invalidation and link change: an answer requested before it is not cached. */
  private generation = 0;
  /**
   * Resolves in flight, by scope, with the generation they were asked in: another exec of
   * the run (or the exec that follows a prefetch, ./run-prefetch.ts) waits for that answer
   * instead of asking again, unless an invalidation or link change came since.
   */
  private readonly inFlight = new Map<string, { generation: number; answer: Promise<ResolvedRun> }>();
  /** What was cached when the orchestrator invalidated every run, served only while its store is down. */
  private readonly fallback = new LRUCache<string, ResolvedRun>({ max: MAX_CACHED_RUNS, ttl: CACHED_RUN_IDLE_MS * 2, updateAgeOnGet: false });
  /** The generation a push last named each run in as changed: an answer asked for before it is not kept at all. */
  private readonly changedAt = new LRUCache<string, number>({ max: MAX_CACHED_RUNS, ttl: CACHED_RUN_IDLE_MS * 2 });
  /** The generation a push last said every run may have changed in. */
  private allChangedAt = -1;
  /** Bumped by every link change: the orchestrator then forgets what this sidecar holds. */
  private linkChanges = 0;
  /** Whether a store outage was already logged (once per outage). */
  private servingStale = false;
  /** Cache hits, misses, and lookups that joined a resolve in flight, for metrics and benchmarks. */
  readonly stats = { hits: 0, misses: 0, joined: 0 };
  /** Answers served from a run's last resolution while the orchestrator's store was down. */
  staleServed = 0;

  constructor(
    private readonly link: OrchestratorLink,
    private readonly log?: Logger,
  ) {
    // The orchestrator forgets what a sidecar whose link went down holds: nothing is kept.
    link.onStateChange(() => {
      this.generation++;
      this.linkChanges++;
      this.cached.clear();
      this.fallback.clear();
    });
    setInterval(() => {
      this.cached.purgeStale();
      this.lastVersion.purgeStale();
    }, PURGE_EVERY_MS).unref();
    link.onInvalidate = (scopes, all, keepForOutage = false) => {
      this.generation++;
      if (all && keepForOutage) {
        // True until now: kept for a store outage, in which nothing changes.
        for (const [key, run] of this.cached.entries()) this.fallback.set(key, run);
        this.cached.clear();
      } else if (all) {
        this.cached.clear();
        this.fallback.clear();
        this.allChangedAt = this.generation;
      } else {
        for (const s of scopes) {
          const key = scopeKeyOf(s);
          const run = this.cached.get(key);
          this.cached.delete(key);
          // Counters a segment behind are good enough for an outage; a run that changed (closed,
          // opened with another policy) is not served from its old answer, not even then.
          if (keepForOutage) {
            if (run) this.fallback.set(key, run);
          } else {
            this.fallback.delete(key);
            this.changedAt.set(key, this.generation);
          }
        }
      }
    };
  }

  async resolve(scope: Scope): Promise<ResolvedRun> {
    const key = scopeKeyOf(scope);
    const hit = this.cached.get(key);
    if (hit && this.link.linkState === "up") {
      this.stats.hits++;
      return hit;
    }
    const pending = this.inFlight.get(key);
    if (pending && pending.generation === this.generation) {
      this.stats.joined++;
      return pending.answer;
    }
    this.stats.misses++;
    const entry = { generation: this.generation, answer: this.fetch(scope, key) };
    this.inFlight.set(key, entry);
    try {
      const run = await entry.answer;
      if (this.servingStale) {
        this.servingStale = false;
        this.log?.info("the orchestrator's store answers again: runs are resolved there again");
      }
      return run;
    } catch (err) {
      const last = isStoreUnavailable(err) ? this.fallback.get(key) : undefined;
      if (!last) throw err;
      this.staleServed++;
      if (!this.servingStale) {
        this.servingStale = true;
        this.log?.warn({ err }, "the orchestrator's store cannot be reached: serving runs from their last resolution until it is back");
      }
      return last;
    } finally {
      if (this.inFlight.get(key) === entry) this.inFlight.delete(key);
    }
  }

  /** Asks the orchestrator for the run; caches the answer when it may. */
  private async fetch(scope: Scope, key: string): Promise<ResolvedRun> {
    const generation = this.generation;
    const links = this.linkChanges;
    const wasUp = this.link.linkState === "up";
    const known = this.lastVersion.get(key) ?? "";
    const res = await this.link.rpc.resolveRun(
      { scope, knownCatalogVersion: this.views.has(known) ? known : "", sidecarId: this.link.sidecarId },
      { deadlineMs: RESOLVE_DEADLINE_MS },
    );
    // The run is the scope's tenant's: an answer for another tenant's (an orchestrator with another tenants file) is no run.
    if (!res.found || (res.tenant || DEFAULT_TENANT) !== tenantOfScope(scope)) {
      this.fallback.delete(key);
      return {
        found: false,
        active: true,
        surface: "none",
        toolSearch: parseToolSearchConfig(),
        mcpRun: parseMcpRunConfig(),
        inactiveReason: "",
        configLayer: undefined,
        catalog: undefined,
        counters: { search: 0, describe: 0, call: 0 },
      };
    }
    // A version names its content (catalog id, policy, id source, namespaces), so a cached view
    // is reused even when the entries came again (a new scope does not know the version yet):
    // its search index is built once per version, not once per agent run.
    let catalog = this.views.get(res.catalogVersion);
    if (!catalog) {
      catalog = new RunCatalog(
        res.catalogVersion,
        res.entries.map((e) => ({
          id: e.id,
          name: e.name,
          label: e.label,
          description: e.description,
          source: SOURCE_NAME[e.source] ?? "openclaw",
          sourceName: e.sourceName,
          parametersJson: e.parametersJson,
          outputSchemaJson: e.outputSchemaJson,
          annotations: annotationsFromWire(e.annotations),
          examplesJson: e.examplesJson,
          keywords: e.keywords,
          ...callerRuleOf(e.allowedCallers),
        })),
        res.mcpServers.map((s) => ({
          name: s.name,
          serverId: s.serverId,
          title: s.title,
          version: s.version,
          description: s.description,
          instructions: s.instructions,
          resources: s.resources,
          prompts: s.prompts,
          aliases: s.aliases,
        })),
        res.namespaces.map((n) => ({ id: n.id, pluginId: n.pluginId, globalName: n.globalName, scopeJson: n.scopeJson })),
      );
      // The search index is built once per version, now, on a worker thread (a search made before it is ready waits for it).
      const version = res.catalogVersion,
        tools = catalog.size;
      const r1 = (ms: number) => Math.round(ms * 10) / 10;
      this.log?.info({ catalogVersion: version, tools }, "catalog view cached");
      catalog.onIndexBuilt = (b) =>
        this.log?.info(
          { catalogVersion: version, tools, indexBuildMs: r1(b.buildMs), thread: b.thread, mainThreadMs: r1(b.mainThreadMs) },
          "search index built",
        );
      catalog.prepareIndex(this.log);
      this.views.set(res.catalogVersion, catalog);
      if (this.views.size > MAX_VIEWS) this.views.delete(this.views.keys().next().value!);
    }
    this.lastVersion.set(key, res.catalogVersion);
    const resolved: ResolvedRun = {
      found: true,
      active: res.codeModeActive,
      // Orchestrators of older builds send no surface: code mode when active.
      surface: SURFACES[res.surface] ?? (res.codeModeActive ? "code_mode" : "direct"),
      toolSearch: parseToolSearchConfig(toolSearchLayerFromWire(res.toolSearch)),
      mcpRun: parseMcpRunConfig(mcpRunLayerFromWire(res.mcpRun)),
      inactiveReason: res.inactiveReason,
      configLayer: configLayerFromWire(res.config),
      catalog,
      counters: { search: res.searchCount, describe: res.describeCount, call: res.callCount },
    };
    // The store answered: the run's fallback is behind it.
    this.fallback.delete(key);
    if (res.cacheable && wasUp && this.link.linkState === "up" && links === this.linkChanges) {
      if (generation === this.generation) this.cached.set(key, resolved);
      // Crossed only by pushes about other runs, or that changed nothing: as true as what the cache held then.
      else if ((this.changedAt.get(key) ?? -1) <= generation && this.allChangedAt <= generation) this.fallback.set(key, resolved);
    }
    return resolved;
  }

  /**
   * Records a segment: the cached run's counters move at once (a new object, so segments
   * in flight keep the counters they started with). The record goes out right after the
   * segment's result was flushed (in the same turn of the event loop, before anything
   * the gateway sends next is read): a gateway that reads the trajectory as soon as it has
   * the result finds the step there (the record is on the wire before its next call). It travels as a message on the open link; with `confirmed` (the caller needs
   * it applied before it goes on), or while the link is not up, as a RecordSegment call.
   */
  async record(
    scope: Scope,
    segment: Omit<MessageInitShape<typeof RecordSegmentRequestSchema>, "scope" | "$typeName" | "sidecarId">,
    confirmed = false,
  ): Promise<void> {
    const key = scopeKeyOf(scope);
    const moved = (run: ResolvedRun): ResolvedRun => {
      const c = run.counters;
      return {
        ...run,
        counters: {
          search: c.search + (segment.searchDelta ?? 0),
          describe: c.describe + (segment.describeDelta ?? 0),
          call: c.call + (segment.callDelta ?? 0),
        },
      };
    };
    const hit = this.cached.get(key);
    if (hit) this.cached.set(key, moved(hit));
    // The outage fallback counts this sidecar's segments too (the orchestrator cannot store them then).
    const last = this.fallback.get(key);
    if (last) this.fallback.set(key, moved(last));
    const req = { scope, ...segment, sidecarId: this.link.sidecarId };
    if (!confirmed && this.link.recordOnLink(req)) return;
    await this.link.client.recordSegment(req, { deadlineMs: RESOLVE_DEADLINE_MS });
  }
}

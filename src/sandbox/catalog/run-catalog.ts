/**
 * A run's catalog as the sidecar uses it: the policy-filtered view from the orchestrator
 * (cached by version), the guest's compact ALL_TOOLS and convenience names, relevance
 * search (ToolSearchIndex, built once per version on a worker thread when the version
 * arrives (./index-builder.ts; `prepareIndex`); a search, and describing or calling an
 * unknown id ("did you mean"), wait for that build; an exec that never reads it never
 * waits), describe, and call-id resolution. In code mode MCP entries are never reachable
 * through tools.*: they are the MCP namespace's (./mcp-catalog.ts); with
 * `searchIncludesMcp` tools.search also lists them with their `MCP.<server>.<fn>` path.
 * On the Tool Search surfaces every entry is searchable and callable by id. A tool's
 * allowed callers apply to every reader: programs never see a direct-only tool (and are
 * refused calling it by id), the structured tools never see a program-only one. Internal
 * namespaces are in ./namespace-catalog.ts. What the guest prelude needs is serialized
 * once per version (`guest`), not per exec.
 */
import { oneLine, ToolSearchIndex, type SearchDoc } from "./search/tool-search-index.js";
import { queryWords } from "./search/tokenize.js";
import type { Logger } from "../../shared/logger.js";
import type { GuestCatalog } from "../pool/task-protocol.js";
import type { CatalogEntryData, McpServerData, NamespaceData } from "./catalog-types.js";
import { type BuiltIndex, sharedIndexBuilder, type SearchIndexBuilder } from "./index-builder.js";
import { McpCatalog } from "./mcp-catalog.js";
import { callableByModel, callableFromCode, modelOnlyMessage } from "../../shared/tool-wire.js";
import { NamespaceCatalog } from "./namespace-catalog.js";

export type { CatalogEntryData };

/** Names that must never become tools.<name>: the helpers, and what JS treats specially. */
const RESERVED = new Set(["search", "describe", "call", "then", "constructor", "prototype", "__proto__", "toString", "valueOf", "toJSON"]);
/** Longest unknown id that gets "did you mean" suggestions (longer ones are not a typo of an id). */
const MAX_SUGGESTED_ID = 200;
/** Code mode's own control tools: never callable from guest code. */
export const CONTROL_NAMES = new Set(["exec", "wait", "tool_search_code", "tool_search", "tool_describe", "tool_call"]);

function safeName(name: string): string | undefined {
  const s = name.replace(/[^A-Za-z0-9_$]/g, "_");
  if (!/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(s) || RESERVED.has(s)) return undefined;
  return s;
}

/**
 * Who reads the catalog: code mode (MCP entries left out, as the seed says), code mode
 * with `searchIncludesMcp` (MCP entries listed with their `call` path, still called
 * through MCP.*), or a Tool Search surface (every entry, callable by id): a program
 * (`tool_search`: tool_search_code, and codemode.run's discovery) or the model through
 * the structured tools (`tool_search_tools`). All but the last are programs.
 */
export type CatalogSurface = "code" | "code+mcp" | "tool_search" | "tool_search_tools";

/** The seed's ToolCatalogEntry; `call` only for MCP entries under `searchIncludesMcp`. */
export type CompactEntry = { id: string; name: string; label?: string; description: string; source: string; sourceName?: string; call?: string };

function searchDoc(e: CatalogEntryData, server: McpServerData | undefined): SearchDoc {
  const d: SearchDoc = {
    id: e.id,
    name: e.name,
    description: e.description,
    source: e.source,
    sourceName: e.sourceName,
    parametersJson: e.parametersJson,
    keywords: e.keywords,
  };
  if (e.label) d.label = e.label;
  if (server) {
    if (server.title) d.serverTitle = server.title;
    if (server.description) d.serverDescription = server.description;
    if (server.aliases.length > 0) d.serverAliases = server.aliases;
  }
  return d;
}

export class RunCatalog {
  readonly entries: readonly CatalogEntryData[];
  /** The entries programs may call: all but the direct-only ones (`entries` itself when no tool has a rule). */
  readonly program: readonly CatalogEntryData[];
  /** Some entry has an allowed-callers rule: searches then filter by the reader. */
  private readonly ruled: boolean;
  private readonly byId = new Map<string, CatalogEntryData>();
  private readonly guestVisible: CatalogEntryData[];
  private built: ToolSearchIndex | undefined;
  /** Settles (never rejects) when the build `prepareIndex` started is over. */
  private building: Promise<void> | undefined;
  private readonly docs: () => SearchDoc[];
  /** Milliseconds the search index took to build (-1 until it is built). */
  indexBuildMs = -1;
  /** Called once when the index is built: how long, on which thread, and what it cost the main thread. */
  onIndexBuilt: ((b: Omit<BuiltIndex, "index">) => void) | undefined;
  private log: Logger | undefined;
  /** `MCP.<server>.<fn>` of each MCP tool id, as the guest calls it. */
  private readonly mcpPaths = new Map<string, string>();
  readonly guest: GuestCatalog;
  /** Entries by source, for every result's telemetry (counted once per version). */
  readonly sources: { core: number; mcp: number; client: number };
  readonly mcp: McpCatalog;
  readonly namespaces: NamespaceCatalog;
  /** The MCP servers' metadata as the view brought it (the codemode.run surface builds its modules from it). */
  readonly mcpServers: readonly McpServerData[];

  constructor(
    readonly version: string,
    entries: readonly CatalogEntryData[],
    servers: readonly McpServerData[] = [],
    namespaces: readonly NamespaceData[] = [],
  ) {
    this.entries = entries;
    this.mcpServers = servers;
    this.ruled = entries.some((e) => e.allowedCallers !== undefined);
    this.program = this.ruled ? entries.filter(callableFromCode) : entries;
    // A server whose only tools are direct-only has nothing for programs (unless its resources or prompts).
    const programMcp = new Set(this.program.filter((e) => e.source === "mcp").map((e) => e.sourceName));
    this.mcp = new McpCatalog(this.program, this.ruled ? servers.filter((s) => programMcp.has(s.name) || s.resources || s.prompts) : servers);
    this.namespaces = new NamespaceCatalog(namespaces, entries);
    for (const e of entries) this.byId.set(e.id, e);
    this.guestVisible = this.program.filter((e) => e.source !== "mcp");
    const serverMeta = new Map(servers.map((s) => [s.name, s]));
    this.docs = () => entries.map((e) => searchDoc(e, e.source === "mcp" ? serverMeta.get(e.sourceName) : undefined));
    for (const [key, , fns] of this.mcp.guestTable) for (const [fn, id] of fns) this.mcpPaths.set(id, `MCP.${key}.${fn}`);
    const counts = new Map<string, number>();
    for (const e of this.guestVisible) {
      const s = safeName(e.name);
      if (s) counts.set(s, (counts.get(s) ?? 0) + 1);
    }
    const convenience: Array<[string, string]> = [];
    for (const e of this.guestVisible) {
      const s = safeName(e.name);
      if (s && counts.get(s) === 1) convenience.push([s, e.id]);
    }
    this.sources = sourceBreakdown(this.entries);
    this.guest = {
      version,
      staticJson: JSON.stringify({
        mcp: this.mcp.guestTable,
        namespaces: this.namespaces.guestTable,
      }),
      allToolsJson: JSON.stringify(this.guestVisible.map((e) => compact(e, false))),
      convenienceJson: JSON.stringify(convenience),
      needsContext: this.namespaces.size > 0,
    };
  }

  /**
   * Starts building the search index off the main thread (once per catalog): called when
   * the version arrives. Every reader awaits it first: `indexReady()` before `search`,
   * `indexReadyFor(id)` before `resolve`/`describe`. A reader that did not would build it
   * on the main thread instead (logged as a warning; the worker's copy is then dropped).
   * When the worker thread is unavailable the builder builds it on the main thread itself.
   */
  prepareIndex(log?: Logger, builder: SearchIndexBuilder = sharedIndexBuilder): void {
    if (this.built || this.building) return;
    this.log = log;
    const t0 = performance.now();
    const docs = this.docs();
    const docsMs = performance.now() - t0;
    this.building = builder
      .build(docs, log)
      .then(
        (b) => {
          if (!this.built) this.adopt({ ...b, mainThreadMs: b.mainThreadMs + docsMs });
        },
        (err: unknown) => log?.warn({ err, catalogVersion: this.version }, "search index build failed; the first search builds it again"),
      )
      .finally(() => (this.building = undefined));
  }

  /** A promise to await before searching while the index is being built; undefined when a search can run now. */
  indexReady(): Promise<void> | undefined {
    return this.built ? undefined : this.building;
  }

  /**
   * A promise to await before `resolve(id)` or `describe(id)` while the index is being
   * built, when answering needs it: only an unknown id does (its "did you mean"). Undefined
   * when the answer can be given now, so describing or calling a known id never waits.
   */
  indexReadyFor(id: string): Promise<void> | undefined {
    return this.suggestsFor(id) ? this.indexReady() : undefined;
  }

  /** Whether resolving `id` reads the index: an unknown, non-blank id that is not a control tool's name and short enough to be a typo. */
  private suggestsFor(id: string): boolean {
    return !this.byId.has(id) && !CONTROL_NAMES.has(id) && id.length <= MAX_SUGGESTED_ID && id.trim() !== "";
  }

  private adopt(b: BuiltIndex): void {
    this.built = b.index;
    this.indexBuildMs = b.buildMs;
    this.onIndexBuilt?.({ buildMs: b.buildMs, thread: b.thread, mainThreadMs: b.mainThreadMs });
  }

  /**
   * The search index; built here, on the main thread, if no build was started (or it
   * failed). A build still in flight means a reader did not await it: it is built here
   * all the same (answers never wait on a caller's mistake), with a warning.
   */
  private get index(): ToolSearchIndex {
    if (!this.built) {
      if (this.building)
        this.log?.warn(
          { catalogVersion: this.version },
          "search index read before the worker thread built it (a reader did not await it); building it on the main thread",
        );
      const t0 = performance.now();
      const index = new ToolSearchIndex(this.docs());
      const ms = performance.now() - t0;
      this.adopt({ index, buildMs: ms, thread: "main", mainThreadMs: ms });
    }
    return this.built!;
  }

  get size(): number {
    return this.entries.length;
  }

  /** Whether a surface lists (searches, describes) an entry. */
  private lists(e: CatalogEntryData, surface: CatalogSurface): boolean {
    if (surface === "tool_search_tools") return callableByModel(e);
    return (surface !== "code" || e.source !== "mcp") && callableFromCode(e);
  }

  /**
   * Why a program may not call the entry with this id (its allowed callers are "model"),
   * or undefined: the check every nested call passes, however the guest made it.
   */
  refuseFromCode(id: string): { ok: false; name: string; message: string } | undefined {
    if (!this.ruled) return undefined;
    const e = this.byId.get(id);
    return e && !callableFromCode(e) ? { ok: false, name: "Error", message: modelOnlyMessage(e.name) } : undefined;
  }

  /** Best matches first, one-line descriptions; a query with no searchable word ("", "a") lists the catalog in order. */
  search(query: string, limit: number, surface: CatalogSurface = "code", only?: (e: CatalogEntryData) => boolean): CompactEntry[] {
    const q = query.trim();
    const keep = (e: CatalogEntryData) => this.lists(e, surface) && (only === undefined || only(e));
    if (queryWords(q).length === 0)
      return this.entries
        .filter(keep)
        .slice(0, limit)
        .map((e) => this.entry(e, surface, true));
    const filter = surface === "code" || only !== undefined || this.ruled ? (id: string) => keep(this.byId.get(id)!) : undefined;
    return this.index.search(q, limit, filter).map((id) => this.entry(this.byId.get(id)!, surface, true));
  }

  /** The seed's compact entry; with `searchIncludesMcp`, an MCP entry also says how to call it. */
  private entry(e: CatalogEntryData, surface: CatalogSurface, short: boolean): CompactEntry {
    const out = compact(e, short);
    if (surface === "code+mcp" && e.source === "mcp") {
      const path = this.mcpPaths.get(e.id);
      if (path) out.call = path;
    }
    return out;
  }

  /** The entry a surface may call by id, or an error message that helps the model. */
  resolve(id: string, surface: CatalogSurface = "code"): { ok: true; entry: CatalogEntryData } | { ok: false; name: string; message: string } {
    const found = this.byId.get(id);
    // The structured tools treat a program-only tool as outside the run's view; a program is told the rule.
    const direct = surface === "tool_search_tools";
    const entry = found && direct && !callableByModel(found) ? undefined : found;
    if (entry && !direct && !callableFromCode(entry)) return { ok: false, name: "Error", message: modelOnlyMessage(entry.name) };
    if (entry && (entry.source !== "mcp" || surface === "tool_search" || direct)) return { ok: true, entry };
    if (entry && entry.source === "mcp") {
      const path = this.mcpPaths.get(id);
      return {
        ok: false,
        name: "ToolNotFound",
        message: `tool ${id} is an MCP tool; MCP tools are called through the MCP namespace, not tools.*.${path ? ` Call it as ${path}({ ... }).` : ""}`,
      };
    }
    if (CONTROL_NAMES.has(id)) {
      const shell = this.guestVisible.find((e) => e.name === id);
      return {
        ok: false,
        name: "ToolNotFound",
        message: `\`${id}\` is a code-mode control tool and cannot be called from guest code.${shell ? ` To run the ${id} tool of the catalog, call its id: ${shell.id}.` : ""}`,
      };
    }
    const shown = id.length > MAX_SUGGESTED_ID ? `${id.slice(0, MAX_SUGGESTED_ID)}…` : id;
    const suggestions = this.suggestsFor(id) ? this.suggest(id, surface) : [];
    const hint =
      surface === "tool_search" || surface === "tool_search_tools"
        ? " Search the catalog (tool_search) to find tool ids."
        : " Use tools.search(query) to find tool ids.";
    return {
      ok: false,
      name: "ToolNotFound",
      message: `unknown tool id ${JSON.stringify(shown)}.${suggestions.length > 0 ? ` Did you mean: ${suggestions.join(", ")}?` : hint}`,
    };
  }

  /** One entry with its full description and exact input schema (`parameters`). */
  describe(
    id: string,
    surface: CatalogSurface = "code",
  ): { ok: true; value: CompactEntry & { parameters: unknown } } | { ok: false; name: string; message: string } {
    const listed = this.byId.get(id);
    const r = listed && surface === "code+mcp" && this.lists(listed, surface) ? { ok: true as const, entry: listed } : this.resolve(id, surface);
    if (!r.ok) return r;
    return { ok: true, value: { ...this.entry(r.entry, surface, false), parameters: JSON.parse(r.entry.parametersJson) as unknown } };
  }

  /** "Did you mean": up to 3 ids the surface lists, closest first. */
  private suggest(id: string, surface: CatalogSurface): string[] {
    return this.index
      .suggest(id, 10)
      .filter((s) => this.lists(this.byId.get(s)!, surface))
      .slice(0, 3);
  }
}

function compact(e: CatalogEntryData, short: boolean): CompactEntry {
  const out: CompactEntry = { id: e.id, name: e.name, description: short ? oneLine(e.description) : e.description, source: e.source };
  if (e.label) out.label = e.label;
  if (e.sourceName) out.sourceName = e.sourceName;
  return out;
}

export function sourceBreakdown(entries: readonly CatalogEntryData[]): { core: number; mcp: number; client: number } {
  const c = { core: 0, mcp: 0, client: 0 };
  for (const e of entries) {
    if (e.source === "mcp") c.mcp++;
    else if (e.source === "client") c.client++;
    else c.core++;
  }
  return c;
}

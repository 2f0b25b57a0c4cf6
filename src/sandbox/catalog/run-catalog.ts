/**
 * A run's catalog as the sidecar uses it: the policy-filtered view from the
 * orchestrator (cached by version), the guest's compact ALL_TOOLS and convenience
 * names, relevance search, describe, and call-id resolution with "did you mean"
 * suggestions. MCP entries stay in the view but are never reachable through tools.*:
 * they are the MCP namespace's (./mcp-catalog.ts). Internal namespaces are in
 * ./namespace-catalog.ts. Everything the guest prelude needs is serialized once per
 * version (`guest`), not per exec.
 */
import MiniSearch from "minisearch";
import type { GuestCatalog } from "../task-protocol.js";
import type { CatalogEntryData, McpServerData, NamespaceData } from "./catalog-types.js";
import { McpCatalog } from "./mcp-catalog.js";
import { NamespaceCatalog } from "./namespace-catalog.js";

export type { CatalogEntryData };

/** Names that must never become tools.<name>: the helpers, and what JS treats specially. */
const RESERVED = new Set(["search", "describe", "call", "then", "constructor", "prototype", "__proto__", "toString", "valueOf", "toJSON"]);
/** Code mode's own control tools: never callable from guest code. */
export const CONTROL_NAMES = new Set(["exec", "wait", "tool_search_code", "tool_search", "tool_describe", "tool_call"]);

function safeName(name: string): string | undefined {
  const s = name.replace(/[^A-Za-z0-9_$]/g, "_");
  if (!/^[A-Za-z_$][A-Za-z0-9_$]*$/.test(s) || RESERVED.has(s)) return undefined;
  return s;
}

function splitWords(text: string): string[] {
  return text
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w.length > 0);
}

function parameterNames(parametersJson: string): string {
  try {
    const schema = JSON.parse(parametersJson) as { properties?: Record<string, unknown> };
    return Object.keys(schema.properties ?? {}).join(" ");
  } catch {
    return "";
  }
}

export type CompactEntry = { id: string; name: string; label?: string; description: string; source: string; sourceName?: string };

export class RunCatalog {
  readonly entries: readonly CatalogEntryData[];
  private readonly byId = new Map<string, CatalogEntryData>();
  private readonly guestVisible: CatalogEntryData[];
  private index: MiniSearch | undefined;
  readonly guest: GuestCatalog;
  readonly mcp: McpCatalog;
  readonly namespaces: NamespaceCatalog;

  constructor(
    readonly version: string,
    entries: readonly CatalogEntryData[],
    servers: readonly McpServerData[] = [],
    namespaces: readonly NamespaceData[] = [],
  ) {
    this.entries = entries;
    this.mcp = new McpCatalog(entries, servers);
    this.namespaces = new NamespaceCatalog(namespaces, entries);
    for (const e of entries) this.byId.set(e.id, e);
    this.guestVisible = entries.filter((e) => e.source !== "mcp");
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
    this.guest = {
      staticJson: JSON.stringify({
        allTools: this.guestVisible.map(compact),
        convenience,
        mcp: this.mcp.guestTable,
        namespaces: this.namespaces.guestTable,
      }),
      needsContext: this.namespaces.size > 0,
    };
  }

  get size(): number {
    return this.entries.length;
  }

  private searchIndex(): MiniSearch {
    if (!this.index) {
      const idx = new MiniSearch<{ id: string; name: string; label: string; description: string; params: string }>({
        fields: ["name", "label", "description", "params"],
        storeFields: [],
        tokenize: (text) => splitWords(text),
        searchOptions: { boost: { name: 3, label: 2, params: 1.5, description: 1 }, prefix: true, fuzzy: 0.2, combineWith: "OR" },
      });
      idx.addAll(this.guestVisible.map((e) => ({ id: e.id, name: e.name, label: e.label, description: e.description, params: parameterNames(e.parametersJson) })));
      this.index = idx;
    }
    return this.index;
  }

  search(query: string, limit: number): CompactEntry[] {
    const q = query.trim();
    if (!q) return this.guestVisible.slice(0, limit).map(compact);
    return this.searchIndex()
      .search(q)
      .slice(0, limit)
      .map((hit) => compact(this.byId.get(String(hit.id))!));
  }

  /** The guest-callable entry for an id, or an error message that helps the model. */
  resolve(id: string): { ok: true; entry: CatalogEntryData } | { ok: false; name: string; message: string } {
    const entry = this.byId.get(id);
    if (entry && entry.source !== "mcp") return { ok: true, entry };
    if (entry && entry.source === "mcp") {
      return { ok: false, name: "ToolNotFound", message: `tool ${id} is an MCP tool; MCP tools are called through the MCP namespace, not tools.*.` };
    }
    if (CONTROL_NAMES.has(id)) {
      const shell = this.guestVisible.find((e) => e.name === id);
      return {
        ok: false,
        name: "ToolNotFound",
        message: `\`${id}\` is a code-mode control tool and cannot be called from guest code.${shell ? ` To run the ${id} tool of the catalog, call its id: ${shell.id}.` : ""}`,
      };
    }
    const shown = id.length > 200 ? `${id.slice(0, 200)}…` : id;
    const suggestions = id.length <= 200 ? this.suggest(id) : [];
    return {
      ok: false,
      name: "ToolNotFound",
      message: `unknown tool id ${JSON.stringify(shown)}.${suggestions.length > 0 ? ` Did you mean: ${suggestions.join(", ")}?` : " Use tools.search(query) to find tool ids."}`,
    };
  }

  describe(id: string): { ok: true; value: CompactEntry & { parameters: unknown } } | { ok: false; name: string; message: string } {
    const r = this.resolve(id);
    if (!r.ok) return r;
    return { ok: true, value: { ...compact(r.entry), parameters: JSON.parse(r.entry.parametersJson) as unknown } };
  }

  private suggest(id: string): string[] {
    const namePart = id.split(":").pop() ?? id;
    const hits = this.searchIndex().search(namePart, { fuzzy: 0.34, prefix: true });
    return hits.slice(0, 3).map((h) => String(h.id));
  }
}

function compact(e: CatalogEntryData): CompactEntry {
  const out: CompactEntry = { id: e.id, name: e.name, description: e.description, source: e.source };
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

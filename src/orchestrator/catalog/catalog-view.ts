/**
 * A run's view of its catalog, as the seed defines it: policy applied, ids
 * `<source>:<owner>:<tool-name>`, the seed's order (core, bundled plugins, external
 * plugins, MCP, client), and no code-mode or Tool Search control tools. MCP servers are
 * part of the view when something of theirs is visible: a tool, or their resources or
 * prompts operations (ids `mcp:<server>:resources/list` and so on, under the same policy).
 * An entry keeps its allowed callers (model, program, or both when absent); each surface
 * applies that rule to the view (../surface.ts, and the sidecar's run catalog).
 */
import { createHash } from "node:crypto";
import type { CatalogEntryData } from "../../shared/catalog-types.js";
import type { StoredCatalog, StoredServer, StoredTool } from "./catalog-store.js";
import { isVisible, policyDigest, type PolicyRules } from "./policy.js";

/** Control tools that never enter a catalog (a gateway's shell `exec` does; see README). */
export const CONTROL_TOOL_NAMES = new Set(["wait", "tool_search_code", "tool_search", "tool_describe", "tool_call"]);

/** The MCP operations behind `MCP.<server>.resources.*` and `.prompts.*`, as catalog tool names. */
export const MCP_RESOURCE_OPS = ["resources/list", "resources/read"] as const;
export const MCP_PROMPT_OPS = ["prompts/list", "prompts/get"] as const;

/** A policy-visible entry with its catalog id (the shape the sidecar's run catalog holds too). */
export type ViewEntry = CatalogEntryData;

/** An MCP server as a run sees it: `resources`/`prompts` only when policy lets the run use them. */
export type ViewServer = StoredServer;

export type CatalogView = { entries: ViewEntry[]; servers: ViewServer[] };

const GROUP: Record<string, number> = { core: 0, bundled_plugin: 1, external_plugin: 2 };

function group(t: StoredTool): number {
  if (t.source === "mcp") return 3;
  if (t.source === "client") return 4;
  return GROUP[t.origin] ?? 2;
}

function emptyServer(name: string): StoredServer {
  return { name, serverId: "", title: "", version: "", description: "", instructions: "", resources: false, prompts: false, aliases: [] };
}

export function buildView(catalog: Pick<StoredCatalog, "tools" | "servers">, rules: PolicyRules, coreSourceName: string): CatalogView {
  const entries: Array<ViewEntry & { g: number }> = [];
  for (const t of catalog.tools) {
    if (CONTROL_TOOL_NAMES.has(t.name)) continue;
    const idSource = t.source === "openclaw" ? coreSourceName : t.source;
    const id = `${idSource}:${t.sourceName}:${t.name}`;
    if (!isVisible(rules, id, t.name)) continue;
    entries.push({
      id,
      name: t.name,
      label: t.label,
      description: t.description,
      source: t.source,
      sourceName: t.sourceName,
      parametersJson: t.parametersJson,
      outputSchemaJson: t.outputSchemaJson,
      annotations: t.annotations,
      examplesJson: t.examplesJson,
      keywords: t.keywords,
      ...(t.allowedCallers ? { allowedCallers: t.allowedCallers } : {}),
      g: group(t),
    });
  }
  entries.sort((a, b) => a.g - b.g || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  const known = new Map(catalog.servers.map((s) => [s.name, s]));
  const withTools = new Set(entries.filter((e) => e.source === "mcp").map((e) => e.sourceName));
  for (const t of catalog.tools) if (t.source === "mcp" && !known.has(t.sourceName)) known.set(t.sourceName, emptyServer(t.sourceName));
  const servers: ViewServer[] = [];
  for (const s of [...known.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
    const opVisible = (op: string) => isVisible(rules, `mcp:${s.name}:${op}`, op);
    const resources = s.resources && MCP_RESOURCE_OPS.every(opVisible);
    const prompts = s.prompts && MCP_PROMPT_OPS.every(opVisible);
    if (withTools.has(s.name) || resources || prompts) servers.push({ ...s, resources, prompts });
  }
  return { entries: entries.map(({ g: _g, ...e }) => e), servers };
}

export function viewVersion(catalogId: string, rules: PolicyRules, coreSourceName: string): string {
  return createHash("sha256")
    .update(`${catalogId}\n${policyDigest(rules)}\n${coreSourceName}`)
    .digest("hex")
    .slice(0, 32);
}

export function sourceCounts(view: readonly ViewEntry[]): { core: number; mcp: number; client: number } {
  const c = { core: 0, mcp: 0, client: 0 };
  for (const e of view) {
    if (e.source === "mcp") c.mcp++;
    else if (e.source === "client") c.client++;
    else c.core++;
  }
  return c;
}

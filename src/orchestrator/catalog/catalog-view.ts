/**
 * A run's view of its catalog, as the seed defines it: policy applied, ids
 * `<source>:<owner>:<tool-name>`, the seed's order (core, bundled plugins, external
 * plugins, MCP, client), and no code-mode or Tool Search control tools.
 */
import { createHash } from "node:crypto";
import type { StoredTool } from "./catalog-store.js";
import { isVisible, policyDigest, type PolicyRules } from "./policy.js";

/** Control tools that never enter a catalog (a gateway's shell `exec` does; see README). */
export const CONTROL_TOOL_NAMES = new Set(["wait", "tool_search_code", "tool_search", "tool_describe", "tool_call"]);

export type ViewEntry = {
  id: string;
  name: string;
  label: string;
  description: string;
  source: "openclaw" | "mcp" | "client";
  sourceName: string;
  parametersJson: string;
};

const GROUP: Record<string, number> = { core: 0, bundled_plugin: 1, external_plugin: 2 };

function group(t: StoredTool): number {
  if (t.source === "mcp") return 3;
  if (t.source === "client") return 4;
  return GROUP[t.origin] ?? 2;
}

export function buildView(tools: readonly StoredTool[], rules: PolicyRules, coreSourceName: string): ViewEntry[] {
  const entries: Array<ViewEntry & { g: number }> = [];
  for (const t of tools) {
    if (CONTROL_TOOL_NAMES.has(t.name)) continue;
    const idSource = t.source === "openclaw" ? coreSourceName : t.source;
    const id = `${idSource}:${t.sourceName}:${t.name}`;
    if (!isVisible(rules, id, t.name)) continue;
    entries.push({ id, name: t.name, label: t.label, description: t.description, source: t.source, sourceName: t.sourceName, parametersJson: t.parametersJson, g: group(t) });
  }
  entries.sort((a, b) => a.g - b.g || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return entries.map(({ g: _g, ...e }) => e);
}

export function viewVersion(catalogId: string, rules: PolicyRules, coreSourceName: string): string {
  return createHash("sha256").update(`${catalogId}\n${policyDigest(rules)}\n${coreSourceName}`).digest("hex").slice(0, 32);
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

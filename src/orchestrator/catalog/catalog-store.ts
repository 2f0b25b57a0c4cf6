/**
 * Content-addressed catalogs: a gateway sends its tools once and refers to them by id
 * afterwards. The id is a SHA-256 over the canonical form (tools sorted by source,
 * owner and name, fields in a fixed order), so the same tool set always gets the same
 * id whatever order it was sent in. A stored catalog never changes. Two stores: in memory
 * (below, the default) and Redis (../state/redis-catalogs.ts), shared by replicas.
 */
import { createHash } from "node:crypto";
import { ToolOrigin, ToolSource, type Tool } from "../../gen/codemode/common/v1/common_pb.js";
import { ServiceError } from "../../protocol/service-error.js";

export type StoredTool = {
  name: string;
  label: string;
  description: string;
  parametersJson: string;
  source: "openclaw" | "mcp" | "client";
  sourceName: string;
  origin: "core" | "bundled_plugin" | "external_plugin";
};

const SOURCE: Record<number, StoredTool["source"] | undefined> = {
  [ToolSource.UNSPECIFIED]: "openclaw",
  [ToolSource.OPENCLAW]: "openclaw",
  [ToolSource.MCP]: "mcp",
  [ToolSource.CLIENT]: "client",
};

const MAX_TOOLS = 10_000;

function normalize(t: Tool, index: number): StoredTool {
  const name = t.name.trim();
  if (!/^[A-Za-z0-9_.:-]{1,128}$/.test(name) || name.includes(":")) {
    throw new ServiceError("invalid_argument", `tools[${index}].name must be 1-128 characters of letters, digits, '_', '-' or '.', got ${JSON.stringify(t.name)}`);
  }
  const source = SOURCE[t.source];
  if (!source) throw new ServiceError("invalid_argument", `tools[${index}].source is not a known ToolSource (${t.source})`);
  const sourceName = t.sourceName.trim() || (source === "openclaw" ? "core" : "");
  if (!/^[A-Za-z0-9_.-]{1,128}$/.test(sourceName)) {
    throw new ServiceError("invalid_argument", `tools[${index}].source_name must name the owner (letters, digits, '_', '-', '.'), got ${JSON.stringify(t.sourceName)}`);
  }
  let parametersJson = t.parametersJson.trim() || '{"type":"object"}';
  try {
    const parsed = JSON.parse(parametersJson) as unknown;
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("not an object");
    parametersJson = JSON.stringify(parsed);
  } catch {
    throw new ServiceError("invalid_argument", `tools[${index}] (${name}).parameters_json must be a JSON Schema object`);
  }
  const origin =
    source !== "openclaw"
      ? "external_plugin"
      : t.origin === ToolOrigin.BUNDLED_PLUGIN
        ? "bundled_plugin"
        : t.origin === ToolOrigin.EXTERNAL_PLUGIN
          ? "external_plugin"
          : t.origin === ToolOrigin.CORE || sourceName === "core"
            ? "core"
            : "external_plugin";
  return { name, label: t.label, description: t.description, parametersJson, source, sourceName, origin };
}

export function canonicalTools(tools: readonly Tool[]): StoredTool[] {
  if (tools.length > MAX_TOOLS) throw new ServiceError("invalid_argument", `a catalog holds at most ${MAX_TOOLS} tools, got ${tools.length}`);
  const out = tools.map(normalize);
  out.sort((a, b) => (a.source + "\0" + a.sourceName + "\0" + a.name < b.source + "\0" + b.sourceName + "\0" + b.name ? -1 : 1));
  for (let i = 1; i < out.length; i++) {
    const a = out[i - 1]!, b = out[i]!;
    if (a.source === b.source && a.sourceName === b.sourceName && a.name === b.name) {
      throw new ServiceError("invalid_argument", `two tools share source ${a.source}, owner ${a.sourceName} and name ${a.name}`);
    }
  }
  return out;
}

export function catalogIdOf(tools: readonly StoredTool[]): string {
  const h = createHash("sha256");
  for (const t of tools) h.update(JSON.stringify([t.source, t.sourceName, t.name, t.origin, t.label, t.description, t.parametersJson])).update("\n");
  return `sha256:${h.digest("hex")}`;
}

/** Validates a tool set and gives its canonical form and content id. */
export function canonicalCatalog(tools: readonly Tool[]): StoredCatalog {
  const canonical = canonicalTools(tools);
  return { id: catalogIdOf(canonical), tools: canonical };
}

export type StoredCatalog = { id: string; tools: readonly StoredTool[] };

export interface CatalogStore {
  /** Validates and stores a tool set (nothing changes when its id is stored already). */
  put(tools: readonly Tool[]): Promise<StoredCatalog>;
  /** The canonical tools of a stored catalog. */
  get(id: string): Promise<readonly StoredTool[] | undefined>;
}

export class MemoryCatalogStore implements CatalogStore {
  private readonly catalogs = new Map<string, readonly StoredTool[]>();

  async put(tools: readonly Tool[]): Promise<StoredCatalog> {
    const { id, tools: canonical } = canonicalCatalog(tools);
    const existing = this.catalogs.get(id);
    if (existing) return { id, tools: existing };
    const frozen = Object.freeze(canonical.map((t) => Object.freeze(t)));
    this.catalogs.set(id, frozen);
    return { id, tools: frozen };
  }

  async get(id: string): Promise<readonly StoredTool[] | undefined> {
    return this.catalogs.get(id);
  }
}

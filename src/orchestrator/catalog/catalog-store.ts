/**
 * Content-addressed catalogs: a gateway sends its tools (and the metadata of its MCP
 * servers) once and refers to them by id afterwards. The id is a SHA-256 over the
 * canonical form (tools sorted by source, owner and name, servers by name, fields in a
 * fixed order), so the same catalog always gets the same id whatever order it was sent
 * in. A stored catalog never changes. Two stores: in memory (below, the default) and
 * Redis (./redis-catalogs.ts), shared by replicas.
 */
import { createHash } from "node:crypto";
import { ToolOrigin, ToolSource, type McpServer, type Tool } from "../../gen/codemode/common/v1/common_pb.js";
import { ServiceError } from "../../protocol/service-error.js";
import { annotationsFromWire, callerRuleFromWire, type Annotations, type CallerRule } from "../../shared/tool-wire.js";
import type { McpServerData } from "../../shared/catalog-types.js";

/** MCP tool annotations as stored (only the hints the gateway set). */
export type StoredAnnotations = Annotations;

export type StoredTool = {
  name: string;
  label: string;
  description: string;
  parametersJson: string;
  source: "openclaw" | "mcp" | "client";
  sourceName: string;
  origin: "core" | "bundled_plugin" | "external_plugin";
  /** "" when the tool declares no output schema. */
  outputSchemaJson: string;
  annotations: StoredAnnotations;
  examplesJson: string[];
  keywords: string[];
  /** Who may call the tool; absent for both (a tool without the rule). */
  allowedCallers?: CallerRule;
};

/** What a gateway knows about one MCP server (see McpServer in common.proto). */
export type StoredServer = McpServerData;

const SOURCE: Record<number, StoredTool["source"] | undefined> = {
  [ToolSource.UNSPECIFIED]: "openclaw",
  [ToolSource.OPENCLAW]: "openclaw",
  [ToolSource.MCP]: "mcp",
  [ToolSource.CLIENT]: "client",
};

const MAX_TOOLS = 10_000;
const MAX_SERVERS = 1_000;
const MAX_EXAMPLES = 8;
const MAX_KEYWORDS = 32;
const MAX_KEYWORD_CHARS = 64;
const MAX_SERVER_TEXT_CHARS = 16_384;
const OWNER_RE = /^[A-Za-z0-9_.-]{1,128}$/;

/** A JSON Schema object sent as text, re-serialized canonically; "" stays "". */
function schemaText(text: string, what: string, fallback: string): string {
  const trimmed = text.trim();
  if (!trimmed) return fallback;
  try {
    const parsed = JSON.parse(trimmed) as unknown;
    if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("not an object");
    return JSON.stringify(parsed);
  } catch {
    throw new ServiceError("invalid_argument", `${what} must be a JSON Schema object`);
  }
}

function examplesOf(examples: readonly string[], where: string): string[] {
  return examples.slice(0, MAX_EXAMPLES).map((text, i) => {
    try {
      return JSON.stringify(JSON.parse(text) as unknown);
    } catch {
      throw new ServiceError("invalid_argument", `${where}.examples_json[${i}] is not JSON`);
    }
  });
}

function keywordsOf(keywords: readonly string[], where: string): string[] {
  if (keywords.length > MAX_KEYWORDS)
    throw new ServiceError("invalid_argument", `${where} has ${keywords.length} keywords; at most ${MAX_KEYWORDS} are allowed`);
  return keywords.map((k) => k.trim().slice(0, MAX_KEYWORD_CHARS)).filter((k) => k.length > 0);
}

function normalize(t: Tool, index: number): StoredTool {
  const name = t.name.trim();
  if (!/^[A-Za-z0-9_.:-]{1,128}$/.test(name) || name.includes(":")) {
    throw new ServiceError(
      "invalid_argument",
      `tools[${index}].name must be 1-128 characters of letters, digits, '_', '-' or '.', got ${JSON.stringify(t.name)}`,
    );
  }
  const source = SOURCE[t.source];
  if (!source) throw new ServiceError("invalid_argument", `tools[${index}].source is not a known ToolSource (${t.source})`);
  const sourceName = t.sourceName.trim() || (source === "openclaw" ? "core" : "");
  if (!OWNER_RE.test(sourceName)) {
    throw new ServiceError(
      "invalid_argument",
      `tools[${index}].source_name must name the owner (letters, digits, '_', '-', '.'), got ${JSON.stringify(t.sourceName)}`,
    );
  }
  const where = `tools[${index}] (${name})`;
  const parametersJson = schemaText(t.parametersJson, `${where}.parameters_json`, '{"type":"object"}');
  const outputSchemaJson = schemaText(t.outputSchemaJson, `${where}.output_schema_json`, "");
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
  const allowedCallers = callerRuleFromWire(t.allowedCallers);
  if (allowedCallers === null) throw new ServiceError("invalid_argument", `${where}.allowed_callers is not a known ToolCallers (${t.allowedCallers})`);
  return {
    name,
    label: t.label,
    description: t.description,
    parametersJson,
    source,
    sourceName,
    origin,
    outputSchemaJson,
    annotations: annotationsFromWire(t.annotations),
    examplesJson: examplesOf(t.examplesJson, where),
    keywords: keywordsOf(t.keywords, where),
    ...(allowedCallers ? { allowedCallers } : {}),
  };
}

function normalizeServer(s: McpServer, index: number): StoredServer {
  const name = s.name.trim();
  if (!OWNER_RE.test(name)) {
    throw new ServiceError(
      "invalid_argument",
      `mcp_servers[${index}].name must be the server's name in catalog ids (letters, digits, '_', '-', '.'), got ${JSON.stringify(s.name)}`,
    );
  }
  const text = (v: string) => v.slice(0, MAX_SERVER_TEXT_CHARS);
  return {
    name,
    serverId: text(s.serverId),
    title: text(s.title),
    version: text(s.version),
    description: text(s.description),
    instructions: text(s.instructions),
    resources: s.resources,
    prompts: s.prompts,
    aliases: keywordsOf(s.aliases, `mcp_servers[${index}] (${name})`),
  };
}

export function canonicalServers(servers: readonly McpServer[]): StoredServer[] {
  if (servers.length > MAX_SERVERS) throw new ServiceError("invalid_argument", `a catalog names at most ${MAX_SERVERS} MCP servers, got ${servers.length}`);
  const out = servers.map(normalizeServer);
  out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (let i = 1; i < out.length; i++) {
    if (out[i - 1]!.name === out[i]!.name) throw new ServiceError("invalid_argument", `two MCP servers share the name ${out[i]!.name}`);
  }
  return out;
}

export function canonicalTools(tools: readonly Tool[]): StoredTool[] {
  if (tools.length > MAX_TOOLS) throw new ServiceError("invalid_argument", `a catalog holds at most ${MAX_TOOLS} tools, got ${tools.length}`);
  const out = tools.map(normalize);
  out.sort((a, b) => (`${a.source}\0${a.sourceName}\0${a.name}` < `${b.source}\0${b.sourceName}\0${b.name}` ? -1 : 1));
  for (let i = 1; i < out.length; i++) {
    const a = out[i - 1]!,
      b = out[i]!;
    if (a.source === b.source && a.sourceName === b.sourceName && a.name === b.name) {
      throw new ServiceError("invalid_argument", `two tools share source ${a.source}, owner ${a.sourceName} and name ${a.name}`);
    }
  }
  return out;
}

export function catalogIdOf(tools: readonly StoredTool[], servers: readonly StoredServer[]): string {
  const h = createHash("sha256");
  for (const t of tools) {
    const base = [t.source, t.sourceName, t.name, t.origin, t.label, t.description, t.parametersJson];
    // Catalogs without the MCP-era fields keep the id they always had.
    const extra = t.outputSchemaJson || t.examplesJson.length > 0 || t.keywords.length > 0 || Object.keys(t.annotations).length > 0;
    const fields = extra ? [...base, t.outputSchemaJson, t.annotations, t.examplesJson, t.keywords] : base;
    // A tool without a caller rule keeps its id too.
    h.update(JSON.stringify(t.allowedCallers ? [...fields, t.allowedCallers] : fields)).update("\n");
  }
  for (const s of servers) h.update(JSON.stringify(["server", s])).update("\n");
  return `sha256:${h.digest("hex")}`;
}

/** Validates a catalog and gives its canonical form and content id. */
export function canonicalCatalog(tools: readonly Tool[], servers: readonly McpServer[] = []): StoredCatalog {
  const canonical = canonicalTools(tools);
  const canonicalMcp = canonicalServers(servers);
  return { id: catalogIdOf(canonical, canonicalMcp), tools: canonical, servers: canonicalMcp };
}

export type StoredCatalog = { id: string; tools: readonly StoredTool[]; servers: readonly StoredServer[] };

export interface CatalogStore {
  /** Validates and stores a catalog (nothing changes when its id is stored already). */
  put(tools: readonly Tool[], servers?: readonly McpServer[]): Promise<StoredCatalog>;
  /** A stored catalog in canonical form. */
  get(id: string): Promise<StoredCatalog | undefined>;
}

export class MemoryCatalogStore implements CatalogStore {
  private readonly catalogs = new Map<string, StoredCatalog>();

  async put(tools: readonly Tool[], servers: readonly McpServer[] = []): Promise<StoredCatalog> {
    const catalog = canonicalCatalog(tools, servers);
    const existing = this.catalogs.get(catalog.id);
    if (existing) return existing;
    const frozen: StoredCatalog = Object.freeze({
      id: catalog.id,
      tools: Object.freeze(catalog.tools.map((t) => Object.freeze(t))),
      servers: Object.freeze(catalog.servers.map((s) => Object.freeze(s))),
    });
    this.catalogs.set(catalog.id, frozen);
    return frozen;
  }

  async get(id: string): Promise<StoredCatalog | undefined> {
    return this.catalogs.get(id);
  }
}

/**
 * How Code Mode for MCP names what the sandbox exposes (the Code Mode for MCP spec, 5.0.1
 * and 6.1): the module path segment of each MCP server (`@codemode/servers/<id>`, also its
 * `serverId` everywhere the script sees one), and the export identifier of each tool. One
 * pure function builds the whole table from a run's catalog view, so the orchestrator's
 * declarations (DescribeSurface), the sidecar's guest modules and its input validation
 * always agree. Same catalog, same names, whatever order entries arrive in. Tools are named
 * by their canonical MCP names, read back from catalog names that carry them escaped
 * (./tool-names.ts: names catalog ids cannot hold).
 */
import type { McpServerData } from "../catalog-types.js";
import { assignIdentifiers } from "../declarations/identifiers.js";
import { canonicalToolName } from "./tool-names.js";

/** The version of the spec this host implements (`specVersion` of `@codemode/discovery`). */
export const SPEC_VERSION = "1.0.0";

/** Exports every server module has besides its tools; a tool mapping to one gets `_`. */
const MODULE_RESERVED: ReadonlySet<string> = new Set(["__meta__"]);

/** What the table needs of a catalog entry (the sidecar's CatalogEntryData and the orchestrator's ViewEntry both fit). */
export type McpRunEntry = {
  id: string;
  name: string;
  description: string;
  source: string;
  sourceName: string;
  parametersJson: string;
  outputSchemaJson: string;
  annotations: Record<string, unknown>;
  examplesJson: readonly string[];
};

/** What the table needs of an MCP server's metadata (McpServer on the wire). */
export type McpRunServerMeta = Omit<McpServerData, "aliases">;

/**
 * How a binding takes its input (spec 5.3.1): `object` (one object argument), `empty`
 * (no argument or `{}`), `other` (a non-object root type: one argument of that type).
 */
export type InputKind = "object" | "empty" | "other";

export type McpRunTool = {
  /** Canonical MCP tool name. */
  toolName: string;
  exportName: string;
  /** Catalog id, `mcp:<server>:<tool>`: what a call is sent as. */
  id: string;
  description: string;
  annotations: Record<string, unknown>;
  inputSchema: unknown;
  outputSchema: unknown;
  examples: unknown[];
  inputKind: InputKind;
};

export type McpRunServer = {
  /** The module path segment, also the serverId the script sees. */
  serverId: string;
  /** The server's name in catalog ids (`mcp:<name>:<tool>`). */
  catalogName: string;
  serverName: string;
  version: string;
  description: string;
  instructions: string;
  capabilities: string[];
  /** Sorted by canonical tool name (the order identifiers were assigned in). */
  tools: McpRunTool[];
};

const byCodeUnit = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** Spec 5.0.1 before disambiguation: lower-case, `[^a-z0-9-]` → `-`, runs of `-` collapsed, edges stripped. */
export function modulePathSegment(serverName: string): string {
  const path = serverName
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, "-")
    .replace(/-+/g, "-")
    .replace(/^-|-$/g, "");
  return path === "" ? "server" : path;
}

/** Module paths for server names, in name order: the first of a clash keeps the clean path, later ones get `--2`, `--3`. */
export function assignModulePaths(names: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  const seen = new Map<string, number>();
  for (const name of [...new Set(names)].sort(byCodeUnit)) {
    const clean = modulePathSegment(name);
    const n = (seen.get(clean) ?? 0) + 1;
    seen.set(clean, n);
    out.set(name, n === 1 ? clean : `${clean}--${n}`);
  }
  return out;
}

function parse(text: string): unknown {
  if (!text) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

const INERT_KEYWORDS = new Set(["$schema", "$id", "title", "description", "type", "additionalProperties", "$comment"]);

/** Which call shape a tool's input schema asks for (spec 5.3.1). */
export function inputKindOf(schema: unknown): InputKind {
  if (schema === undefined || schema === true || (isRecord(schema) && Object.keys(schema).length === 0)) return "empty";
  if (!isRecord(schema)) return "object";
  const t = schema.type;
  const types = Array.isArray(t) ? t : t === undefined ? [] : [t];
  if (types.length > 0 && !types.includes("object")) return "other";
  if (Object.keys(schema).every((k) => INERT_KEYWORDS.has(k))) return "empty";
  const props = schema.properties;
  const required = schema.required;
  const noProps = props === undefined || (isRecord(props) && Object.keys(props).length === 0);
  const noRequired = required === undefined || (Array.isArray(required) && required.length === 0);
  const others = Object.keys(schema).filter((k) => !INERT_KEYWORDS.has(k) && k !== "properties" && k !== "required");
  return noProps && noRequired && others.length === 0 ? "empty" : "object";
}

/**
 * The run's MCP servers as the sandbox exposes them, sorted by serverId. Servers come
 * from the metadata list and from MCP entries that name a server it does not list.
 * Non-MCP entries are not part of this surface.
 */
export function buildServerTable(entries: readonly McpRunEntry[], servers: readonly McpRunServerMeta[]): McpRunServer[] {
  const byServer = new Map<string, McpRunEntry[]>();
  for (const e of entries) {
    if (e.source !== "mcp") continue;
    const list = byServer.get(e.sourceName) ?? [];
    list.push(e);
    byServer.set(e.sourceName, list);
  }
  const meta = new Map(servers.map((s) => [s.name, s]));
  for (const name of byServer.keys()) {
    if (!meta.has(name)) meta.set(name, { name, serverId: "", title: "", version: "", description: "", instructions: "", resources: false, prompts: false });
  }
  const paths = assignModulePaths([...meta.keys()]);
  const out: McpRunServer[] = [];
  for (const [name, path] of paths) {
    const s = meta.get(name)!;
    // Canonical MCP names (a catalog may carry one escaped: ./tool-names.ts), in their order (spec 6.1).
    const tools = (byServer.get(name) ?? []).map((e) => ({ e, toolName: canonicalToolName(e.name) })).sort((a, b) => byCodeUnit(a.toolName, b.toolName));
    const exports = assignIdentifiers(
      tools.map((t) => t.toolName),
      "export",
      MODULE_RESERVED,
    );
    out.push({
      serverId: path,
      catalogName: name,
      serverName: s.title || s.serverId || name,
      version: s.version,
      description: s.description,
      instructions: s.instructions,
      capabilities: ["tools", ...(s.resources ? ["resources"] : []), ...(s.prompts ? ["prompts"] : [])],
      tools: tools.map(({ e: t, toolName }) => {
        const inputSchema = parse(t.parametersJson);
        return {
          toolName,
          exportName: exports.get(toolName)!,
          id: t.id,
          description: t.description,
          annotations: t.annotations,
          inputSchema,
          outputSchema: parse(t.outputSchemaJson),
          examples: t.examplesJson.map(parse).filter((x) => x !== undefined),
          inputKind: inputKindOf(inputSchema),
        };
      }),
    });
  }
  return out.sort((a, b) => byCodeUnit(a.serverId, b.serverId));
}

/** The server a capability id or module specifier names: `<serverId>`, `@codemode/servers/<serverId>`, or its catalog name. */
export function findServer(table: readonly McpRunServer[], idOrSpecifier: string): McpRunServer | undefined {
  const id = idOrSpecifier.startsWith(SERVER_MODULE_PREFIX) ? idOrSpecifier.slice(SERVER_MODULE_PREFIX.length) : idOrSpecifier;
  return table.find((s) => s.serverId === id) ?? table.find((s) => s.catalogName === id);
}

export const SERVER_MODULE_PREFIX = "@codemode/servers/";
export const DISCOVERY_MODULE = "@codemode/discovery";
export const ERRORS_MODULE = "@codemode/errors";

/** Exports of the two standard modules (spec 4.1, 7.1). */
export const DISCOVERY_EXPORTS = ["specVersion", "listServers", "describeServer", "listTools", "getTool", "searchTools"] as const;
export const ERROR_CLASSES = [
  "CodemodeError",
  "SchemaValidationError",
  "ToolNotFoundError",
  "ServerNotFoundError",
  "ToolCallError",
  "AuthenticationError",
  "SandboxLimitError",
] as const;

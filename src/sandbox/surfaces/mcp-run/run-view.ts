/**
 * A run's catalog as the `codemode.run` surface sees it on the sidecar, built once per
 * catalog version (a RunCatalog) and cached with it: the server table of the shared
 * naming rules (../../../shared/mcp-run/naming.ts), the boot JSON the prelude reads (servers,
 * exports, catalog ids, one-line metadata), the module lookup the import linker uses,
 * compiled input validators, and the answers to the prelude's discovery requests
 * (`describe`: full definitions of a server's tools; `search`: ranked definitions from
 * the catalog's search index, at the requested detail level).
 */
import type { ValidateFunction } from "ajv";
import {
  buildServerTable,
  DISCOVERY_EXPORTS,
  DISCOVERY_MODULE,
  ERROR_CLASSES,
  ERRORS_MODULE,
  findServer,
  SERVER_MODULE_PREFIX,
  type McpRunServer,
  type McpRunTool,
} from "../../../shared/mcp-run/naming.js";
import type { CatalogEntryData, RunCatalog } from "../../catalog/run-catalog.js";
import type { Answer } from "../../exec/segment.js";
import type { ModuleLookup } from "./module-transform.js";
import { compileValidator, validateInput } from "./validation.js";

/** Search results per call: the default and the maximum (spec 4.2.7: defaults to the host's maximum). */
export const MAX_SEARCH_RESULTS = 20;
const DETAIL = { name: 0, description: 1, full: 2 } as const;

const views = new WeakMap<RunCatalog, McpRunView>();
let emptyView: McpRunView | undefined;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function payloadOf(json: string): Record<string, unknown> {
  try {
    const v = JSON.parse(json) as unknown;
    return isRecord(v) ? v : {};
  } catch {
    return {};
  }
}

/** A ToolDefinition at a detail level (spec 4.3): optional fields are omitted below it. */
function definition(tool: McpRunTool, detail: number): Record<string, unknown> {
  const out: Record<string, unknown> = { toolName: tool.toolName, exportName: tool.exportName };
  if (detail >= 1 && tool.description) out.description = tool.description;
  if (detail >= 1 && Object.keys(tool.annotations).length > 0) out.annotations = tool.annotations;
  if (detail >= 2 && tool.inputSchema !== undefined) out.inputSchema = tool.inputSchema;
  if (detail >= 2 && tool.outputSchema !== undefined) out.outputSchema = tool.outputSchema;
  return out;
}

export class McpRunView {
  readonly servers: McpRunServer[];
  /** Boot JSON of the prelude: {servers: [[serverId, catalogName, serverName, version, description, capabilities, tools]]}. */
  readonly staticJson: string;
  private readonly byId = new Map<string, { server: McpRunServer; tool: McpRunTool }>();
  private readonly validators = new Map<string, ValidateFunction | undefined>();

  private constructor(private readonly catalog: RunCatalog | undefined) {
    this.servers = catalog ? buildServerTable(catalog.program, catalog.mcpServers) : [];
    for (const server of this.servers) for (const tool of server.tools) this.byId.set(tool.id, { server, tool });
    this.staticJson = JSON.stringify({
      servers: this.servers.map((s) => [
        s.serverId,
        s.catalogName,
        s.serverName,
        s.version,
        s.description || s.instructions.slice(0, 1000),
        s.capabilities,
        s.tools.map((t) => [t.toolName, t.exportName, t.id, t.description, Object.keys(t.annotations).length > 0 ? t.annotations : null, t.inputKind]),
      ]),
    });
  }

  static of(catalog: RunCatalog | undefined): McpRunView {
    if (!catalog) return (emptyView ??= new McpRunView(undefined));
    let view = views.get(catalog);
    if (!view) {
      view = new McpRunView(catalog);
      views.set(catalog, view);
    }
    return view;
  }

  server(idOrSpecifier: string): McpRunServer | undefined {
    return findServer(this.servers, idOrSpecifier);
  }

  private serverList(): string {
    return this.servers.map((s) => s.serverId).join(", ") || "(none)";
  }

  /** The import linker's view of a module specifier. */
  lookup = (specifier: string): ModuleLookup => {
    if (specifier === DISCOVERY_MODULE) return { ok: true, exports: new Set(DISCOVERY_EXPORTS) };
    if (specifier === ERRORS_MODULE) return { ok: true, exports: new Set(ERROR_CLASSES) };
    if (specifier.startsWith(SERVER_MODULE_PREFIX)) {
      const id = specifier.slice(SERVER_MODULE_PREFIX.length);
      const s = this.servers.find((x) => x.serverId === id);
      if (s) return { ok: true, exports: new Set([...s.tools.map((t) => t.exportName), "__meta__"]) };
      const near = this.server(id);
      return {
        ok: false,
        message: `cannot import ${JSON.stringify(specifier)}: no connected MCP server has the id ${JSON.stringify(id)}.`,
        hint: near
          ? `Import "@codemode/servers/${near.serverId}" (module paths are the normalized server id).`
          : `Connected servers: ${this.serverList()}; listServers() lists them.`,
        errorClass: "ServerNotFoundError",
      };
    }
    return {
      ok: false,
      message: `cannot import ${JSON.stringify(specifier)}: only @codemode/discovery, @codemode/errors and @codemode/servers/<serverId> can be imported.`,
      hint: `Remove the import; use the MCP servers instead (${this.serverList()}).`,
    };
  };

  /** Input validation of a resolved MCP call, before it reaches the gateway. */
  checkCall = (entry: CatalogEntryData, inputJson: string): { name: string; message: string } | undefined => {
    const found = this.byId.get(entry.id);
    if (!found) return undefined;
    if (!this.validators.has(entry.id)) this.validators.set(entry.id, compileValidator(found.tool.inputSchema));
    return validateInput(this.validators.get(entry.id), found.server, found.tool, inputJson);
  };

  /**
   * Discovery requests of the prelude (`describe`, `search`); anything else is not ours.
   * A `search` reaches this only once the version's index is built (the segment awaits
   * `indexReady()` for every search request), so it never builds the index on the main thread.
   */
  answer = (op: string, payloadJson: string): Answer | undefined => {
    const p = payloadOf(payloadJson);
    if (op === "describe") {
      const server = this.server(typeof p.serverId === "string" ? p.serverId : "");
      if (!server) return { ok: false, error: { name: "ServerNotFoundError", message: `no connected MCP server has the id ${JSON.stringify(p.serverId)}.` } };
      const names = Array.isArray(p.tools) ? new Set(p.tools.filter((n): n is string => typeof n === "string")) : undefined;
      const tools = names ? server.tools.filter((t) => names.has(t.toolName)) : server.tools;
      return { ok: true, json: JSON.stringify(tools.map((t) => definition(t, DETAIL.full))) };
    }
    if (op === "search") {
      const detail = DETAIL[p.detail as keyof typeof DETAIL] ?? DETAIL.description;
      const only = typeof p.serverId === "string" && p.serverId !== "" ? this.server(p.serverId) : undefined;
      const requested = typeof p.limit === "number" && Number.isFinite(p.limit) ? Math.trunc(p.limit) : MAX_SEARCH_RESULTS;
      const limit = Math.min(MAX_SEARCH_RESULTS, Math.max(1, requested));
      const query = typeof p.query === "string" ? p.query.slice(0, 256) : "";
      const hits = this.catalog
        ? this.catalog.search(query, limit, "tool_search", (e) => this.byId.has(e.id) && (!only || this.byId.get(e.id)!.server === only))
        : [];
      const results = hits.map((h) => {
        const found = this.byId.get(h.id)!;
        return { serverId: found.server.serverId, ...definition(found.tool, detail) };
      });
      return { ok: true, json: JSON.stringify(results) };
    }
    return undefined;
  };
}

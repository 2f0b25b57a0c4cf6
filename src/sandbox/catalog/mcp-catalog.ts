/**
 * A run's MCP tools as code mode exposes them: the `MCP.<server>.<function>` table the
 * guest prelude installs, the resolution of a guest's MCP call back to its exact catalog
 * id (tools, and the resources/prompts operations of servers that offer them), and the
 * read-only virtual API files (`mcp/index.d.ts`, `mcp/<server>.d.ts`) and `$api()`
 * headers. Identifiers follow the shared mapping (camel case, spec 6.1 collisions);
 * declarations are rendered once per catalog version, on first use, never per exec.
 */
import { assignIdentifiers, MCP_MEMBER_RESERVED, MCP_SERVER_RESERVED } from "../../shared/declarations/identifiers.js";
import { renderIndexFile, renderServerFile, renderToolDeclarations, type McpServerDecl, type McpToolDecl } from "./mcp-api-files.js";
import type { CatalogEntryData, McpServerData } from "./catalog-types.js";

/** The MCP operations a server's `resources`/`prompts` members call, by guest member. */
const RESOURCE_OPS = { list: "resources/list", read: "resources/read" } as const;
const PROMPT_OPS = { list: "prompts/list", get: "prompts/get" } as const;
const OP_DESCRIPTIONS: Record<string, string> = {
  "resources/list": "List the server's resources (MCP resources/list).",
  "resources/read": "Read one resource by uri (MCP resources/read).",
  "prompts/list": "List the server's prompts (MCP prompts/list).",
  "prompts/get": "Get one prompt with its arguments (MCP prompts/get).",
};

export type Failure = { ok: false; name: string; message: string };
export type ApiFile = { path: string; bytes: number; description: string };

type ServerTable = { decl: McpServerDecl; tools: McpToolDecl[] };

function parseJson(text: string): unknown {
  if (!text) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

function toolDecl(e: CatalogEntryData, functionName: string): McpToolDecl {
  const decl: McpToolDecl = {
    id: e.id,
    name: e.name,
    functionName,
    description: e.description,
    inputSchema: parseJson(e.parametersJson) ?? { type: "object" },
  };
  const output = parseJson(e.outputSchemaJson);
  if (output !== undefined) decl.outputSchema = output;
  if (Object.keys(e.annotations).length > 0) decl.annotations = e.annotations;
  if (e.examplesJson.length > 0) decl.examples = e.examplesJson.map((x) => parseJson(x));
  return decl;
}

function serverDecl(s: McpServerData, key: string): McpServerDecl {
  const d: McpServerDecl = { key, name: s.name, resources: s.resources, prompts: s.prompts };
  if (s.title) d.title = s.title;
  if (s.version) d.version = s.version;
  if (s.description) d.description = s.description;
  if (s.instructions) d.instructions = s.instructions;
  return d;
}

/** A path the guest asked for, checked: relative, no `.`/`..`/empty segments. */
function checkPath(path: string, what: string): Failure | undefined {
  const shown = JSON.stringify(path.length > 200 ? `${path.slice(0, 200)}…` : path);
  if (path.startsWith("/") || path.includes("\\") || /^[A-Za-z]:/.test(path))
    return { ok: false, name: "TypeError", message: `${what} ${shown} must be a relative path such as "mcp/index.d.ts".` };
  const segments = path.split("/");
  if (segments.some((s) => s === "." || s === ".."))
    return { ok: false, name: "TypeError", message: `${what} ${shown} must not contain "." or ".." segments.` };
  return undefined;
}

export class McpCatalog {
  private readonly servers: ServerTable[] = [];
  private readonly byId = new Map<string, CatalogEntryData>();
  private readonly byServerName = new Map<string, ServerTable>();
  /** [key, serverName, [[function, id]...], resources, prompts], as the prelude reads it. */
  readonly guestTable: Array<[string, string, Array<[string, string]>, boolean, boolean]> = [];
  private files: Map<string, string> | undefined;

  constructor(entries: readonly CatalogEntryData[], servers: readonly McpServerData[]) {
    const toolsByServer = new Map<string, CatalogEntryData[]>();
    for (const e of entries) {
      if (e.source !== "mcp") continue;
      this.byId.set(e.id, e);
      const list = toolsByServer.get(e.sourceName) ?? [];
      list.push(e);
      toolsByServer.set(e.sourceName, list);
    }
    const known = new Map(servers.map((s) => [s.name, s]));
    for (const name of toolsByServer.keys()) {
      if (!known.has(name))
        known.set(name, { name, serverId: "", title: "", version: "", description: "", instructions: "", resources: false, prompts: false, aliases: [] });
    }
    const names = [...known.keys()].sort();
    const keys = assignIdentifiers(names, "camel", MCP_SERVER_RESERVED);
    for (const name of names) {
      const server = known.get(name)!;
      const key = keys.get(name)!;
      const tools = (toolsByServer.get(name) ?? []).slice().sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      const fns = assignIdentifiers(
        tools.map((t) => t.name),
        "camel",
        MCP_MEMBER_RESERVED,
      );
      const table: ServerTable = { decl: serverDecl(server, key), tools: tools.map((t) => toolDecl(t, fns.get(t.name)!)) };
      this.servers.push(table);
      this.byServerName.set(name, table);
      this.guestTable.push([key, name, table.tools.map((t) => [t.functionName, t.id]), server.resources, server.prompts]);
      for (const [ops, on] of [
        [RESOURCE_OPS, server.resources],
        [PROMPT_OPS, server.prompts],
      ] as const) {
        if (!on) continue;
        for (const op of Object.values(ops)) {
          const id = `mcp:${name}:${op}`;
          this.byId.set(id, {
            id,
            name: op,
            label: "",
            description: OP_DESCRIPTIONS[op] ?? op,
            source: "mcp",
            sourceName: name,
            parametersJson: '{"type":"object"}',
            outputSchemaJson: "",
            annotations: {},
            examplesJson: [],
            keywords: [],
          });
        }
      }
    }
  }

  get serverCount(): number {
    return this.servers.length;
  }

  /** The catalog entry an MCP call from the guest targets, by exact id. */
  resolve(id: string): { ok: true; entry: CatalogEntryData } | Failure {
    const entry = this.byId.get(id);
    if (entry) return { ok: true, entry };
    const shown = JSON.stringify(id.length > 200 ? `${id.slice(0, 200)}…` : id);
    return { ok: false, name: "ToolNotFound", message: `no visible MCP tool has the id ${shown}. API.list("mcp") lists the servers this run can call.` };
  }

  private rendered(): Map<string, string> {
    if (!this.files) {
      const files = new Map<string, string>();
      if (this.servers.length > 0) {
        files.set("mcp/index.d.ts", renderIndexFile(this.servers.map((s) => ({ server: s.decl, tools: s.tools }))));
        for (const s of this.servers) files.set(`mcp/${s.decl.key}.d.ts`, renderServerFile(s.decl, s.tools));
      }
      this.files = files;
    }
    return this.files;
  }

  /** `API.list(prefix)`: metadata of the files whose path starts with the prefix ("" or "mcp" lists all). */
  list(prefix: string): ApiFile[] | Failure {
    const bad = checkPath(prefix, "API.list prefix");
    if (bad) return bad;
    const out: ApiFile[] = [];
    for (const [path, text] of this.rendered()) {
      if (!path.startsWith(prefix)) continue;
      const server = this.servers.find((s) => `mcp/${s.decl.key}.d.ts` === path);
      const description = server
        ? `MCP.${server.decl.key}: ${server.tools.length} tool${server.tools.length === 1 ? "" : "s"} of MCP server ${server.decl.name}${server.decl.description ? ` (${firstSentence(server.decl.description)})` : ""}`
        : "shared MCP types and the list of servers";
      out.push({ path, bytes: Buffer.byteLength(text, "utf8"), description });
    }
    return out;
  }

  /** `API.read(path)`: the declaration text of one file. */
  read(path: string): { ok: true; text: string } | Failure {
    const bad = checkPath(path, "API.read path");
    if (bad) return bad;
    const text = this.rendered().get(path);
    if (text !== undefined) return { ok: true, text };
    const known = [...this.rendered().keys()];
    const shown = JSON.stringify(path.length > 200 ? `${path.slice(0, 200)}…` : path);
    return {
      ok: false,
      name: "NotFound",
      message:
        known.length > 0
          ? `no API file ${shown}. Files: ${known.slice(0, 20).join(", ")}${known.length > 20 ? ", …" : ""}.`
          : `no API file ${shown}: this run has no visible MCP tools.`,
    };
  }

  /** `MCP.<server>.$api(toolName?, {schema?})`: the server's header, or one tool's. */
  api(serverName: string, toolName: string, schema: boolean): { ok: true; value: unknown } | Failure {
    const s = this.byServerName.get(serverName);
    if (!s) return { ok: false, name: "NotFound", message: `no visible MCP server ${JSON.stringify(serverName.slice(0, 200))}.` };
    const path = `mcp/${s.decl.key}.d.ts`;
    const summary = (t: McpToolDecl) => ({
      name: t.name,
      function: t.functionName,
      id: t.id,
      description: t.description,
      ...(t.annotations ? { annotations: t.annotations } : {}),
    });
    if (!toolName) {
      return {
        ok: true,
        value: { server: s.decl.name, namespace: `MCP.${s.decl.key}`, path, declarations: this.rendered().get(path) ?? "", tools: s.tools.map(summary) },
      };
    }
    const tool = s.tools.find((t) => t.name === toolName) ?? s.tools.find((t) => t.functionName === toolName);
    if (!tool) {
      return {
        ok: false,
        name: "NotFound",
        message: `MCP.${s.decl.key} has no tool ${JSON.stringify(toolName.slice(0, 200))}. Tools: ${s.tools
          .map((t) => t.functionName)
          .slice(0, 30)
          .join(", ")}.`,
      };
    }
    const value: Record<string, unknown> = {
      server: s.decl.name,
      namespace: `MCP.${s.decl.key}`,
      path,
      declarations: renderToolDeclarations(s.decl, tool),
      tools: [summary(tool)],
    };
    if (schema) value.schema = tool.outputSchema === undefined ? { input: tool.inputSchema } : { input: tool.inputSchema, output: tool.outputSchema };
    return { ok: true, value };
  }
}

function firstSentence(text: string): string {
  const t = text.trim().split(/(?<=[.!?])\s/)[0] ?? "";
  return t.length > 120 ? `${t.slice(0, 119)}…` : t;
}

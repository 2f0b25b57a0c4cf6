/**
 * TypeScript declarations of what a `codemode.run` script can import (spec 4.4, 6.2,
 * 6.3): the standard modules `@codemode/discovery` and `@codemode/errors`, and one
 * `declare module "@codemode/servers/<id>"` per server with a function per tool, typed
 * from the tool's JSON Schemas by the shared generator (../declarations/schema-to-ts.ts)
 * and documented from its description, parameters and annotations. The text goes into
 * the agent's context (the `codemode.run` description). Pure and deterministic.
 */
import { capText, compactJson, docBlock, oneLine, propertyKey } from "../declarations/jsdoc.js";
import { schemaToType } from "../declarations/schema-to-ts.js";
import { SPEC_VERSION, type McpRunServer, type McpRunTool } from "./naming.js";

const IN = "  ";
const MAX_TOOL_DESCRIPTION = 2000;
const HINTS = ["readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"] as const;

/** The standard modules, the shared types and the result global. */
export const STANDARD_DECLARATIONS = `/** What an MCP tool call returns when it is not unwrapped (see the unwrapping rules). */
interface McpCallToolResult { content?: Array<{ type: string; text?: string; data?: string; mimeType?: string; [key: string]: unknown }>; structuredContent?: unknown; isError?: boolean; [key: string]: unknown }
interface McpToolAnnotations { title?: string; readOnlyHint?: boolean; destructiveHint?: boolean; idempotentHint?: boolean; openWorldHint?: boolean }
/** \`__meta__\` of a server module. */
interface CodemodeServerMeta { serverId: string; serverName: string; serverVersion?: string; tools: Array<{ toolName: string; exportName: string; description?: string }> }
/** Assign the script's structured result here; the response's \`result\` is its final value (null when unset). */
declare var __codemode_result__: unknown;

declare module "@codemode/discovery" {
  /** The version of the Code Mode for MCP spec this host implements (semver): "${SPEC_VERSION}". */
  export const specVersion: string;
  export type DetailLevel = "name" | "description" | "full";
  export interface ServerInfo { serverId: string; serverName: string; capabilities?: string[] }
  export interface ServerDescription extends ServerInfo { description?: string; version?: string }
  /** detail "name": toolName and exportName only; "description" (default) adds description and annotations. */
  export interface ToolSummary { toolName: string; exportName: string; description?: string; annotations?: McpToolAnnotations }
  /** detail "full" adds the JSON Schemas. */
  export interface ToolDefinition extends ToolSummary { inputSchema?: Record<string, unknown>; outputSchema?: Record<string, unknown> }
  export interface SearchResults { query: string; results: Array<ToolDefinition & { serverId: string }> }
  export interface ListToolsOptions { detail?: DetailLevel }
  /** limit defaults to (and is capped at) 20. */
  export interface SearchToolsOptions { detail?: DetailLevel; serverId?: string; limit?: number }
  export function listServers(): Promise<ServerInfo[]>;
  /** Throws ServerNotFoundError for an unknown serverId. */
  export function describeServer(serverId: string): Promise<ServerDescription>;
  export function listTools(serverId: string, options?: ListToolsOptions): Promise<ToolDefinition[]>;
  /** toolName is the canonical MCP name (an exportName is accepted too); throws ToolNotFoundError. */
  export function getTool(serverId: string, toolName: string): Promise<ToolDefinition>;
  /** Ranked relevance search over tool names, descriptions and parameters of every server (or one). */
  export function searchTools(query: string, options?: SearchToolsOptions): Promise<SearchResults>;
}

declare module "@codemode/errors" {
  /** Base class of every error the host throws; \`hint\` is one recommended corrective action. */
  export class CodemodeError extends Error { readonly hint: string; readonly serverId?: string; readonly toolName?: string; readonly exportName?: string }
  /** The input failed the tool's input schema (checked before the call leaves the sandbox). */
  export class SchemaValidationError extends CodemodeError { readonly path: string; readonly expected: string; readonly received: string; readonly example?: unknown }
  /** The server has no such tool. */
  export class ToolNotFoundError extends CodemodeError {}
  /** No connected server has that id. */
  export class ServerNotFoundError extends CodemodeError {}
  /** The tool failed: an MCP result with isError (kept in \`result\`), or a failure reaching it. */
  export class ToolCallError extends CodemodeError { readonly result?: McpCallToolResult }
  /** The server rejected the call for invalid or missing credentials. */
  export class AuthenticationError extends ToolCallError {}
  /** A sandbox limit was exceeded (timeout, memory, tool call cap). */
  export class SandboxLimitError extends CodemodeError { readonly limit: string }
}
`;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** `@param input.<name>` lines for the documented top-level input properties. */
function paramLines(schema: unknown): string[] {
  if (!isRecord(schema) || !isRecord(schema.properties)) return [];
  const out: string[] = [];
  for (const [key, p] of Object.entries(schema.properties)) {
    if (!isRecord(p)) continue;
    const text = typeof p.description === "string" ? p.description.trim() : typeof p.title === "string" ? p.title.trim() : "";
    const extra = "default" in p ? compactJson(p.default, 80) : undefined;
    if (!text && extra === undefined) continue;
    const name = propertyKey(key) === key ? `input.${key}` : `input[${JSON.stringify(key)}]`;
    out.push(`@param ${name} ${[capText(text, 600), extra !== undefined ? `(default ${extra})` : ""].filter(Boolean).join(" ")}`);
  }
  return out;
}

/** Spec 6.3: every annotation the server set, as a doc tag. */
function annotationLines(a: Record<string, unknown>): string[] {
  const out: string[] = [];
  if (typeof a.title === "string" && a.title.trim()) out.push(`@title ${oneLine(a.title, 200)}`);
  for (const k of HINTS) if (typeof a[k] === "boolean") out.push(`@${k} ${String(a[k])}`);
  return out;
}

function inputOptional(tool: McpRunTool): boolean {
  if (tool.inputKind === "empty") return true;
  if (tool.inputKind === "other") return false;
  const s = tool.inputSchema;
  if (!isRecord(s)) return false;
  if (["$ref", "allOf", "anyOf", "oneOf", "not", "if"].some((k) => k in s)) return false;
  return !(Array.isArray(s.required) && s.required.length > 0);
}

function pascal(name: string): string {
  const base = name.replace(/^_+/, "");
  return base.charAt(0).toUpperCase() + base.slice(1) || "Tool";
}

function toolBlock(server: McpRunServer, tool: McpRunTool, used: Set<string>): string {
  const prefix = pascal(tool.exportName);
  const input = schemaToType(tool.inputSchema ?? { type: "object" }, { aliasPrefix: prefix, indent: IN, usedNames: used, rootPropertyDocs: false });
  const output = tool.outputSchema === undefined ? undefined : schemaToType(tool.outputSchema, { aliasPrefix: `${prefix}Output`, indent: IN, usedNames: used });
  const doc: string[] = [];
  if (tool.description.trim()) doc.push(capText(tool.description, MAX_TOOL_DESCRIPTION));
  doc.push(...paramLines(tool.inputSchema), ...annotationLines(tool.annotations));
  for (const e of tool.examples.slice(0, 2)) {
    const text = compactJson(e, 301);
    if (text !== undefined && text.length <= 300) doc.push(`@example await ${tool.exportName}(${text})`);
  }
  doc.push(
    output
      ? "@returns the tool's structuredContent."
      : "@returns structuredContent if present; else the text of a single text block; else the whole McpCallToolResult.",
    `MCP tool ${JSON.stringify(tool.toolName)} of server ${JSON.stringify(server.serverId)}.`,
  );
  const param = `input${inputOptional(tool) ? "?" : ""}: ${input.type}`;
  const aliases = [...input.aliases, ...(output?.aliases ?? [])].map((a) => `${a}\n`).join("");
  return `${aliases}${docBlock(doc, IN)}${IN}export function ${tool.exportName}(${param}): Promise<${output ? output.type : "unknown"}>;\n`;
}

/** `declare module "@codemode/servers/<id>"`: one function per tool and `__meta__`. */
export function renderServerModule(server: McpRunServer): string {
  const who = [
    `MCP server ${JSON.stringify(server.serverId)}`,
    server.serverName !== server.serverId ? `(${oneLine(server.serverName, 120)})` : "",
    server.version ? `version ${oneLine(server.version, 40)}` : "",
  ]
    .filter(Boolean)
    .join(" ");
  const lines = [`${who}.`];
  if (server.description.trim()) lines.push(capText(server.description, 600));
  if (server.instructions.trim()) lines.push("Instructions:", capText(server.instructions, 1500));
  const used = new Set(["McpCallToolResult", "McpToolAnnotations", "CodemodeServerMeta"]);
  const blocks = server.tools.map((t) => toolBlock(server, t, used));
  return `${docBlock(lines, "")}declare module "@codemode/servers/${server.serverId}" {\n${IN}export {};\n${blocks.join("")}${IN}export const __meta__: CodemodeServerMeta;\n}\n`;
}

/** Everything a script can import, for the given servers. */
export function renderDeclarations(servers: readonly McpRunServer[]): string {
  return [STANDARD_DECLARATIONS, ...servers.map(renderServerModule)].join("\n");
}

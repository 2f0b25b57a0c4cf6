/**
 * The read-only virtual API files code mode serves through `API.list("mcp")` /
 * `API.read(path)`: `mcp/index.d.ts` (shared types and the list of servers) and one
 * `mcp/<key>.d.ts` per server declaring `namespace MCP.<key>` with a function per tool,
 * typed from the tool's JSON Schemas and documented from its metadata. The same text
 * backs `MCP.<server>.$api()`. Rendering is pure and deterministic: same input, same bytes.
 */
import { isSafeIdentifier } from "../../shared/declarations/identifiers.js";
import { capText, compactJson, docBlock, firstSentence, oneLine, propertyKey } from "../../shared/declarations/jsdoc.js";
import { schemaToType } from "../../shared/declarations/schema-to-ts.js";

export type McpServerDecl = {
  /** Identifier on `MCP`, e.g. chromeDevtools. */
  key: string;
  /** Server name as in catalog ids. */
  name: string;
  title?: string;
  version?: string;
  description?: string;
  instructions?: string;
  resources: boolean;
  prompts: boolean;
};

export type McpToolAnnotations = { title?: string; readOnlyHint?: boolean; destructiveHint?: boolean; idempotentHint?: boolean; openWorldHint?: boolean };

export type McpToolDecl = {
  /** Catalog id, mcp:<server>:<tool>. */
  id: string;
  /** Canonical MCP tool name. */
  name: string;
  /** From assignIdentifiers(..., "camel", MCP_MEMBER_RESERVED). */
  functionName: string;
  description: string;
  inputSchema: unknown;
  outputSchema?: unknown;
  annotations?: McpToolAnnotations;
  examples?: unknown[];
};

const IN = "  ";
const MAX_TOOL_DESCRIPTION = 4000;
const MAX_INSTRUCTIONS = 2000;
/** Type names the index declares globally; aliases inside a namespace must not shadow them. */
const GLOBAL_TYPES = [
  "McpToolResult",
  "McpToolAnnotations",
  "McpApiHeader",
  "McpResource",
  "McpResourceList",
  "McpResourceContents",
  "McpPromptList",
  "McpPrompt",
];
const MEMBER_NAMES = new Set(["$api", "resources", "prompts"]);

const SHARED_TYPES = `/** What every MCP tool call resolves to; S types structuredContent when the tool declares an output schema. */
type McpToolResult<S = unknown> = { content?: unknown[]; structuredContent?: S; isError?: boolean; [key: string]: unknown };
type McpToolAnnotations = { title?: string; readOnlyHint?: boolean; destructiveHint?: boolean; idempotentHint?: boolean; openWorldHint?: boolean };
/** What MCP.<server>.$api() returns. */
type McpApiHeader = {
  server: string;
  namespace: string;
  path: string;
  declarations: string;
  tools: Array<{ name: string; function: string; id: string; description: string; annotations?: McpToolAnnotations }>;
  schema?: { input: unknown; output?: unknown };
};
type McpResource = { uri: string; name?: string; title?: string; description?: string; mimeType?: string; [key: string]: unknown };
type McpResourceList = { resources: McpResource[]; nextCursor?: string; [key: string]: unknown };
type McpResourceContents = { contents: Array<{ uri: string; mimeType?: string; text?: string; blob?: string; [key: string]: unknown }>; [key: string]: unknown };
type McpPromptList = { prompts: Array<{ name: string; title?: string; description?: string; arguments?: Array<{ name: string; description?: string; required?: boolean; [key: string]: unknown }>; [key: string]: unknown }>; nextCursor?: string; [key: string]: unknown };
type McpPrompt = { description?: string; messages: Array<{ role: string; content: unknown; [key: string]: unknown }>; [key: string]: unknown };
`;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

const byName = (a: McpToolDecl, b: McpToolDecl): number => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

function checkServer(server: McpServerDecl): void {
  if (!isSafeIdentifier(server.key)) throw new TypeError(`MCP server key ${JSON.stringify(server.key)} is not a safe identifier; use assignIdentifiers`);
}

function checkTools(server: McpServerDecl, tools: readonly McpToolDecl[]): void {
  const seen = new Set<string>();
  for (const t of tools) {
    const fn = t.functionName;
    if (!isSafeIdentifier(fn) || MEMBER_NAMES.has(fn) || seen.has(fn)) {
      throw new TypeError(
        `MCP.${server.key}: function name ${JSON.stringify(fn)} for tool ${JSON.stringify(t.name)} is not a safe, unique identifier; use assignIdentifiers`,
      );
    }
    seen.add(fn);
  }
}

function serverSummary(server: McpServerDecl): string {
  const text = server.description || server.title || "";
  return text ? firstSentence(text, 200) : "";
}

/** `mcp/index.d.ts`: how to call, the shared types, and one line per server. */
export function renderIndexFile(servers: ReadonlyArray<{ server: McpServerDecl; tools: readonly McpToolDecl[] }>): string {
  const sorted = [...servers].sort((a, b) => (a.server.key < b.server.key ? -1 : a.server.key > b.server.key ? 1 : 0));
  for (const s of sorted) checkServer(s.server);
  const header = docBlock(
    [
      "MCP API declarations (virtual, read-only).",
      "Call a tool with one object argument: const result = await MCP.<server>.<fn>({ ...input });",
      "Read mcp/<server>.d.ts for a server's functions and input types; MCP.<server>.$api(toolName?) returns the same at run time.",
    ],
    "",
  );
  const lines = sorted.map(({ server, tools }) => {
    const extras = [server.resources ? "resources" : "", server.prompts ? "prompts" : ""].filter(Boolean);
    const count = `${tools.length} tool${tools.length === 1 ? "" : "s"}${extras.length > 0 ? ` + ${extras.join(", ")}` : ""}`;
    const summary = serverSummary(server);
    return `- MCP.${server.key} (mcp/${server.key}.d.ts, ${count}; MCP server ${JSON.stringify(oneLine(server.name, 100))})${summary ? `: ${summary}` : ""}`;
  });
  const list = docBlock(["Servers:", ...(lines.length > 0 ? lines : ["(none)"])], "");
  return `${header}${SHARED_TYPES}\n${list}`;
}

/** The doc comment above `namespace MCP.<key>`: who the server is and its instructions. */
function serverDoc(server: McpServerDecl): string {
  const who = [
    server.title ? oneLine(server.title, 200) : "",
    `MCP server ${JSON.stringify(oneLine(server.name, 200))}${server.version ? ` version ${oneLine(server.version, 60)}` : ""}`,
  ]
    .filter(Boolean)
    .join(" — ");
  const lines = [`${who}.`];
  if (server.description?.trim()) lines.push(capText(server.description, MAX_INSTRUCTIONS));
  if (server.instructions?.trim()) lines.push("", "Instructions:", capText(server.instructions, MAX_INSTRUCTIONS));
  return docBlock(lines, "");
}

function pascal(name: string): string {
  return name.charAt(0).toUpperCase() + name.slice(1);
}

/** One `@param input.<name> ...` line per documented top-level input property. */
function paramLines(schema: unknown): string[] {
  if (!isRecord(schema) || !isRecord(schema.properties)) return [];
  const props = schema.properties;
  const out: string[] = [];
  for (const key of Object.keys(props)) {
    const p = props[key];
    if (!isRecord(p)) continue;
    const text = typeof p.description === "string" ? p.description.trim() : typeof p.title === "string" ? p.title.trim() : "";
    const extras: string[] = [];
    if ("default" in p) {
      const d = compactJson(p.default, 80);
      if (d !== undefined) extras.push(`default ${d}`);
    }
    if (typeof p.format === "string" && p.format) extras.push(`format ${oneLine(p.format, 40)}`);
    if (p.deprecated === true) extras.push("deprecated");
    if (!text && extras.length === 0) continue;
    const name = propertyKey(key) === key ? `input.${key}` : `input[${JSON.stringify(key)}]`;
    out.push(`@param ${name} ${[capText(text, 1000), extras.length > 0 ? `(${extras.join("; ")})` : ""].filter(Boolean).join(" ")}`);
  }
  return out;
}

function annotationLines(a: McpToolAnnotations | undefined): string[] {
  if (!a) return [];
  const hints = [
    ["readOnlyHint", "@readOnly"],
    ["destructiveHint", "@destructive"],
    ["idempotentHint", "@idempotent"],
    ["openWorldHint", "@openWorld"],
  ] as const;
  const on = hints.filter(([k]) => a[k] === true).map(([, tag]) => tag);
  const off = hints.filter(([k]) => a[k] === false).map(([k]) => `${k}: false`);
  if (on.length === 0) return off.length > 0 ? [`Annotations: ${off.join(", ")}.`] : [];
  return [[...on, ...(off.length > 0 ? [`(${off.join(", ")})`] : [])].join(" ")];
}

/** True unless the input schema visibly requires nothing (then `input` is optional). */
function inputRequired(schema: unknown): boolean {
  if (schema === true || schema === undefined) return false;
  if (!isRecord(schema)) return true;
  if (["$ref", "allOf", "anyOf", "oneOf", "not", "if"].some((k) => k in schema)) return true;
  if (Array.isArray(schema.required) && schema.required.length > 0) return true;
  const t = schema.type;
  return t !== undefined && t !== "object" && !(Array.isArray(t) && t.includes("object"));
}

/** One tool's aliases, doc comment and function declaration, indented for a namespace body. */
function toolBlock(server: McpServerDecl, tool: McpToolDecl, used: Set<string>): string {
  const prefix = pascal(tool.functionName);
  const input = schemaToType(tool.inputSchema ?? true, { aliasPrefix: prefix, indent: IN, usedNames: used, rootPropertyDocs: false });
  const output = tool.outputSchema === undefined ? undefined : schemaToType(tool.outputSchema, { aliasPrefix: `${prefix}Output`, indent: IN, usedNames: used });
  const doc: string[] = [];
  if (tool.description.trim()) doc.push(capText(tool.description, MAX_TOOL_DESCRIPTION));
  if (tool.annotations?.title?.trim()) doc.push(`@title ${oneLine(tool.annotations.title, 200)}`);
  doc.push(...paramLines(tool.inputSchema));
  doc.push(...annotationLines(tool.annotations));
  // Only whole examples: a truncated one would not be valid input.
  const examples = (tool.examples ?? []).map((e) => compactJson(e, 301)).filter((e): e is string => e !== undefined && e.length <= 300);
  for (const e of examples.slice(0, 2)) doc.push(`@example await MCP.${server.key}.${tool.functionName}(${e})`);
  doc.push(`MCP tool ${JSON.stringify(tool.name)}, catalog id ${tool.id}.`);
  const param = `input${inputRequired(tool.inputSchema) ? "" : "?"}: ${input.type}`;
  const result = output ? `McpToolResult<${output.type}>` : "McpToolResult";
  const aliases = [...input.aliases, ...(output?.aliases ?? [])].map((a) => `${a}\n`).join("");
  return `${aliases}${docBlock(doc, IN)}${IN}function ${tool.functionName}(${param}): Promise<${result}>;\n`;
}

function namespaceUsedNames(): Set<string> {
  return new Set(GLOBAL_TYPES);
}

const API_DECL = `${IN}/** Return this TypeScript-style API header (or one tool's, with its JSON Schemas when schema is true). */
${IN}function $api(toolName?: string, options?: { schema?: boolean }): Promise<McpApiHeader>;
`;

const RESOURCES_DECL = `${IN}/** The server's resources (MCP resources/list and resources/read). */
${IN}namespace resources {
${IN}${IN}function list(input?: { cursor?: string }): Promise<McpResourceList>;
${IN}${IN}function read(input: { uri: string }): Promise<McpResourceContents>;
${IN}}
`;

const PROMPTS_DECL = `${IN}/** The server's prompts (MCP prompts/list and prompts/get). */
${IN}namespace prompts {
${IN}${IN}function list(input?: { cursor?: string }): Promise<McpPromptList>;
${IN}${IN}function get(input: { name: string; arguments?: Record<string, string> }): Promise<McpPrompt>;
${IN}}
`;

/** `mcp/<key>.d.ts`: the server's namespace with `$api`, a function per tool, resources and prompts. */
export function renderServerFile(server: McpServerDecl, tools: readonly McpToolDecl[]): string {
  checkServer(server);
  checkTools(server, tools);
  const used = namespaceUsedNames();
  const blocks = [API_DECL, ...[...tools].sort(byName).map((t) => toolBlock(server, t, used))];
  if (server.resources) blocks.push(RESOURCES_DECL);
  if (server.prompts) blocks.push(PROMPTS_DECL);
  return `/// <reference path="./index.d.ts" />\n${serverDoc(server)}declare namespace MCP.${server.key} {\n${blocks.join("\n")}}\n`;
}

/** One tool's declaration (with its aliases) in `declare namespace MCP.<key>`, for `$api(toolName)`. */
export function renderToolDeclarations(server: McpServerDecl, tool: McpToolDecl): string {
  checkServer(server);
  checkTools(server, [tool]);
  return `declare namespace MCP.${server.key} {\n${toolBlock(server, tool, namespaceUsedNames())}}\n`;
}

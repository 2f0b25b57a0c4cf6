/**
 * Loads `codemode exec --tools FILE.mjs`: a module whose default export is an array of
 * tool definitions with handlers (each may say who can call it: `allowedCallers`
 * "model", "program" or "both"; and that a person must approve each call first:
 * `needsApproval`, true or the reason), and which may also export `mcpServers` (metadata of
 * the MCP servers its `source: "mcp"` tools belong to) and `namespaces` (internal
 * namespace registrations whose callable members are `{ $tool, args? }` markers, as
 * the wire carries them). Checked by zod schemas, and a namespace's scope by the shared
 * serializer (so a raw function is refused before anything is sent); an error names the
 * entry and the field or scope path.
 */
import { pathToFileURL } from "node:url";
import { resolve } from "node:path";
import { z } from "zod";
import { serializeNamespaceScope, NamespaceScopeError } from "../shared/namespace-scope.js";
import type { GatewayMcpServer } from "../shared/tool-wire.js";

const toolSchema = z.object({
  name: z.string().min(1),
  label: z.string().optional(),
  description: z.string().default(""),
  parameters: z.record(z.string(), z.unknown()).default({ type: "object" }),
  outputSchema: z.record(z.string(), z.unknown()).optional(),
  annotations: z
    .object({
      title: z.string().optional(),
      readOnlyHint: z.boolean().optional(),
      destructiveHint: z.boolean().optional(),
      idempotentHint: z.boolean().optional(),
      openWorldHint: z.boolean().optional(),
    })
    .optional(),
  examples: z.array(z.unknown()).optional(),
  keywords: z.array(z.string()).optional(),
  source: z.enum(["openclaw", "mcp", "client"]).default("openclaw"),
  owner: z.string().optional(),
  origin: z.enum(["core", "bundled_plugin", "external_plugin"]).optional(),
  allowedCallers: z.enum(["model", "program", "both"]).optional(),
  /** The gateway (the CLI) asks a person before each call runs: true, or the reason shown. */
  needsApproval: z.union([z.boolean(), z.string().min(1)]).optional(),
  handler: z.custom<(input: unknown) => unknown>((v) => typeof v === "function", { message: "handler must be a function" }),
});

const serverSchema = z.object({
  name: z.string().min(1),
  serverId: z.string().optional(),
  title: z.string().optional(),
  version: z.string().optional(),
  description: z.string().optional(),
  instructions: z.string().optional(),
  resources: z.boolean().optional(),
  prompts: z.boolean().optional(),
  aliases: z.array(z.string()).optional(),
});

const namespaceSchema = z.object({
  pluginId: z.string().min(1),
  id: z.string().min(1),
  globalName: z.string().min(1),
  description: z.string().default(""),
  prompt: z.string().default(""),
  requiredToolNames: z.array(z.string()).min(1),
  scope: z.unknown(),
});

export type CliTool = z.output<typeof toolSchema> & { owner: string };
/** A namespace registration with its scope already serialized to the wire's JSON text. */
export type CliNamespace = Omit<z.output<typeof namespaceSchema>, "scope"> & { scopeJson: string };
export type ToolsModule = { tools: CliTool[]; mcpServers: GatewayMcpServer[]; namespaces: CliNamespace[] };

function issueText(file: string, where: string, error: z.ZodError): string {
  const issue = error.issues[0];
  return `${file}: ${where}${issue?.path.length ? `.${issue.path.join(".")}` : ""}: ${issue?.message}`;
}

export async function loadToolsModule(file: string): Promise<ToolsModule> {
  const mod = (await import(pathToFileURL(resolve(file)).href)) as { default?: unknown; mcpServers?: unknown; namespaces?: unknown };
  const list = mod.default;
  if (!Array.isArray(list)) throw new Error(`${file}: the default export must be an array of tools`);
  const tools = list.map((entry, i) => {
    const parsed = toolSchema.safeParse(entry);
    if (!parsed.success) throw new Error(issueText(file, `tools[${i}]`, parsed.error));
    const t = parsed.data;
    return { ...t, owner: t.owner ?? (t.source === "openclaw" ? "core" : t.source === "client" ? "app" : "server") };
  });
  const servers = mod.mcpServers ?? [];
  if (!Array.isArray(servers)) throw new Error(`${file}: the mcpServers export must be an array`);
  const mcpServers = servers.map((entry, i) => {
    const parsed = serverSchema.safeParse(entry);
    if (!parsed.success) throw new Error(issueText(file, `mcpServers[${i}]`, parsed.error));
    return parsed.data;
  });
  const regs = mod.namespaces ?? [];
  if (!Array.isArray(regs)) throw new Error(`${file}: the namespaces export must be an array`);
  const namespaces = regs.map((entry, i) => {
    const parsed = namespaceSchema.safeParse(entry);
    if (!parsed.success) throw new Error(issueText(file, `namespaces[${i}]`, parsed.error));
    const { scope, ...rest } = parsed.data;
    try {
      return { ...rest, scopeJson: serializeNamespaceScope(scope ?? {}) };
    } catch (err) {
      if (err instanceof NamespaceScopeError) throw new Error(`${file}: namespaces[${i}] (${rest.id}): ${err.message}`);
      throw err;
    }
  });
  return { tools, mcpServers, namespaces };
}

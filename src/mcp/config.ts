/**
 * The MCP front's config file: upstream MCP servers named the way MCP clients name them,
 * `{"mcpServers": {"<name>": {"command", "args"?, "env"?, "cwd"?} | {"url", "headers"?}}}`
 * (Claude Desktop's key; VS Code's `"servers"` is read too). An entry may say `"type"`
 * ("stdio", "http"/"streamable-http", or "sse") and `"disabled": true`. Errors name the
 * server and the key. `${VAR}` in env, headers and args is replaced from the front's own
 * environment, so secrets need not sit in the file.
 */
import { readFile } from "node:fs/promises";
import { z } from "zod";

export type StdioUpstream = { kind: "stdio"; command: string; args: string[]; env: Record<string, string>; cwd?: string };
export type HttpUpstream = { kind: "http" | "sse"; url: string; headers: Record<string, string> };
export type UpstreamSpec = StdioUpstream | HttpUpstream;
export type FrontConfig = { servers: Array<{ name: string; spec: UpstreamSpec }> };

export class FrontConfigError extends Error {
  override name = "FrontConfigError";
}

const strings = z.record(z.string(), z.string());
const entrySchema = z
  .object({
    type: z.enum(["stdio", "http", "streamable-http", "streamableHttp", "sse"]).optional(),
    command: z.string().min(1).optional(),
    args: z.array(z.string()).optional(),
    env: strings.optional(),
    cwd: z.string().optional(),
    url: z.string().min(1).optional(),
    headers: strings.optional(),
    disabled: z.boolean().optional(),
  })
  .passthrough();

function expand(text: string, env: NodeJS.ProcessEnv): string {
  return text.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (_, name: string) => env[name] ?? "");
}

function expandAll(r: Record<string, string> | undefined, env: NodeJS.ProcessEnv): Record<string, string> {
  return Object.fromEntries(Object.entries(r ?? {}).map(([k, v]) => [k, expand(v, env)]));
}

/** Parses a config document (already JSON-parsed). */
export function parseFrontConfig(doc: unknown, env: NodeJS.ProcessEnv = process.env): FrontConfig {
  if (doc === null || typeof doc !== "object" || Array.isArray(doc)) throw new FrontConfigError('the config must be a JSON object with an "mcpServers" object');
  const d = doc as Record<string, unknown>;
  const table = d.mcpServers ?? d.servers;
  if (table === null || typeof table !== "object" || Array.isArray(table))
    throw new FrontConfigError('the config needs an "mcpServers" object: {"mcpServers": {"<name>": {"command": ...} | {"url": ...}}}');
  const servers: FrontConfig["servers"] = [];
  for (const [name, raw] of Object.entries(table as Record<string, unknown>)) {
    if (name.trim() === "") throw new FrontConfigError("mcpServers has an entry with an empty name");
    const parsed = entrySchema.safeParse(raw);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new FrontConfigError(`mcpServers.${name}${issue?.path.length ? `.${issue.path.join(".")}` : ""}: ${issue?.message ?? "invalid entry"}`);
    }
    const e = parsed.data;
    if (e.disabled) continue;
    const wantsHttp = e.type !== undefined && e.type !== "stdio";
    if (e.command !== undefined && !wantsHttp) {
      if (e.url !== undefined) throw new FrontConfigError(`mcpServers.${name}: give "command" (stdio) or "url" (HTTP), not both`);
      const spec: StdioUpstream = {
        kind: "stdio",
        command: expand(e.command, env),
        args: (e.args ?? []).map((a) => expand(a, env)),
        env: expandAll(e.env, env),
      };
      if (e.cwd !== undefined) spec.cwd = expand(e.cwd, env);
      servers.push({ name, spec });
    } else if (e.url !== undefined) {
      const url = expand(e.url, env);
      if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol))
        throw new FrontConfigError(`mcpServers.${name}.url must be an http(s) URL, got ${JSON.stringify(url)}`);
      servers.push({ name, spec: { kind: e.type === "sse" ? "sse" : "http", url, headers: expandAll(e.headers, env) } });
    } else {
      throw new FrontConfigError(`mcpServers.${name}: needs "command" (a stdio server) or "url" (a streamable HTTP server)`);
    }
  }
  return { servers };
}

export async function loadFrontConfig(path: string, env: NodeJS.ProcessEnv = process.env): Promise<FrontConfig> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    throw new FrontConfigError(`cannot read the config file ${path}: ${(err as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(text) as unknown;
  } catch (err) {
    throw new FrontConfigError(`the config file ${path} is not JSON: ${(err as Error).message}`);
  }
  return parseFrontConfig(doc, env);
}

/**
 * The front's catalog: what its connected upstream servers offer, in the sidecar's wire
 * form (every tool a `Tool` with source MCP and source_name the server's catalog name,
 * every server an `McpServer` with its initialize metadata). A server's catalog name is
 * its config name with characters catalog ids cannot hold replaced by `_` (a clash gets
 * `_2`, `_3`); the sandbox derives module paths from it (spec 5.0.1). A tool whose name
 * catalog ids cannot hold (`files/read`, `get weather`) is entered under its escaped name
 * (../shared/mcp-run/tool-names.ts), which the sandbox reads back as the canonical name
 * and the gateway when it calls the tool; only a name too long even escaped, or a
 * repeated one, is left out (and logged). Servers that are not connected are not in the
 * catalog, so scripts see them as unavailable rather than failing mid-run.
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import type { McpServerSchema, ToolSchema } from "../gen/codemode/common/v1/common_pb.js";
import type { Logger } from "../shared/logger.js";
import { catalogToolName } from "../shared/mcp-run/tool-names.js";
import { toWireMcpServer, toWireTool } from "../shared/tool-wire.js";
import type { Upstream } from "./upstream.js";

const HINTS = ["title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"] as const;

/** Catalog names for config names, in config order: sanitized, unique. */
export function catalogNames(names: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  const taken = new Set<string>();
  for (const name of names) {
    const base = name.replace(/[^A-Za-z0-9_.-]/g, "_").slice(0, 120) || "server";
    let candidate = base;
    for (let n = 2; taken.has(candidate); n++) candidate = `${base}_${n}`;
    taken.add(candidate);
    out.set(name, candidate);
  }
  return out;
}

export type WireCatalog = { tools: Array<MessageInitShape<typeof ToolSchema>>; mcpServers: Array<MessageInitShape<typeof McpServerSchema>> };

export function buildCatalog(upstreams: ReadonlyArray<{ catalogName: string; upstream: Upstream }>, log: Logger): WireCatalog {
  const tools: WireCatalog["tools"] = [];
  const mcpServers: WireCatalog["mcpServers"] = [];
  for (const { catalogName, upstream } of upstreams) {
    if (upstream.state !== "connected") continue;
    const info = upstream.info as { name?: string; title?: string; version?: string; description?: string } | undefined;
    mcpServers.push(
      toWireMcpServer({
        name: catalogName,
        serverId: info?.name ?? "",
        title: info?.title ?? "",
        version: info?.version ?? "",
        description: typeof info?.description === "string" ? info.description : "",
        instructions: upstream.instructions,
        resources: upstream.capabilities.resources !== undefined,
        prompts: upstream.capabilities.prompts !== undefined,
      }),
    );
    const seen = new Set<string>();
    for (const t of upstream.tools) {
      const name = catalogToolName(t.name);
      if (name === undefined || seen.has(name)) {
        log.warn(
          { server: upstream.name, tool: t.name.slice(0, 200) },
          "upstream tool left out: its name repeats, or is empty or too long for a catalog id even escaped (at most 128 characters)",
        );
        continue;
      }
      seen.add(name);
      const a = (t.annotations ?? {}) as Record<string, unknown>;
      const annotations = Object.fromEntries(
        HINTS.filter((k) => a[k] !== undefined && typeof a[k] === (k === "title" ? "string" : "boolean")).map((k) => [k, a[k]]),
      );
      tools.push(
        toWireTool({
          name,
          label: t.title ?? (typeof a.title === "string" ? a.title : ""),
          description: t.description ?? "",
          parameters: t.inputSchema as Record<string, unknown>,
          source: "mcp",
          owner: catalogName,
          outputSchema: t.outputSchema as Record<string, unknown> | undefined,
          annotations,
          // An escaped name hides its words from the catalog search; the canonical name restores them.
          ...(name !== t.name ? { keywords: [t.name.slice(0, 64)] } : {}),
        }),
      );
    }
  }
  return { tools, mcpServers };
}

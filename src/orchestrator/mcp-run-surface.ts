/**
 * The model-visible tool of a run whose surface is Code Mode for MCP: `codemode.run`, its
 * description (documentation block plus the TypeScript declarations of every server
 * module) rendered from the run's view by the shared generator. Rendering grows with the
 * catalog, and every OpenRun and DescribeSurface asks for it, so it is kept per view
 * version and limits (an LRU of MAX_CACHED entries).
 */
import type { CodeModeConfig } from "../shared/config.js";
import type { McpRunConfig } from "../shared/mcp-run/config.js";
import { buildServerTable } from "../shared/mcp-run/naming.js";
import { runToolDefinition } from "../shared/mcp-run/tool-definition.js";
import type { ViewEntry, ViewServer } from "./catalog/catalog-view.js";

export type McpRunModelTool = { name: string; description: string; inputSchema: Record<string, unknown> };

const MAX_CACHED = 64;
const cache = new Map<string, McpRunModelTool>();

export function mcpRunModelTool(
  view: readonly ViewEntry[],
  servers: readonly ViewServer[],
  config: CodeModeConfig,
  mcpRun: McpRunConfig,
  viewVersion: string,
): McpRunModelTool {
  const limits = {
    timeoutMs: config.timeoutMs,
    maxMemoryBytes: config.memoryLimitBytes,
    maxLogBytes: mcpRun.maxLogBytes,
    maxToolCalls: mcpRun.maxToolCalls,
    maxConcurrentCalls: config.maxPendingToolCalls,
  };
  const key = viewVersion ? `${viewVersion}\n${JSON.stringify(limits)}` : "";
  const hit = key ? cache.get(key) : undefined;
  if (hit) {
    cache.delete(key);
    cache.set(key, hit);
    return hit;
  }
  const def = runToolDefinition(buildServerTable(view, servers), limits);
  const tool = { name: def.name, description: def.description, inputSchema: def.inputSchema };
  if (key) {
    cache.set(key, tool);
    if (cache.size > MAX_CACHED) cache.delete(cache.keys().next().value!);
  }
  return tool;
}

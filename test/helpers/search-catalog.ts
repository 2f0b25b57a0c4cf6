/**
 * A large catalog for search-index tests against real processes: one marker tool (so
 * each catalog is its own version, and its index is built afresh), then the real MCP
 * servers of bench/fixtures/mcp-catalog.json, padded with copies under other server
 * names up to `size` tools. Shared by the tests that need an index of realistic size.
 */
import { readFileSync } from "node:fs";
import type { GatewayMcpServer, GatewayTool } from "../../src/shared/tool-wire.js";

type FixtureServer = { name: string; description?: string; tools: Array<{ name: string; description?: string; inputSchema?: Record<string, unknown> }> };
const fixture = JSON.parse(readFileSync(new URL("../../bench/fixtures/mcp-catalog.json", import.meta.url), "utf8")) as { servers: FixtureServer[] };

export function largeCatalog(marker: string, size = 2000): { tools: GatewayTool[]; servers: GatewayMcpServer[] } {
  const tools: GatewayTool[] = [{ name: marker, description: `Marker tool ${marker}` }];
  const servers: GatewayMcpServer[] = [];
  for (let round = 1; tools.length < size && round < 10; round++) {
    for (const s of fixture.servers) {
      if (tools.length >= size) break;
      const name = round === 1 ? s.name : `${s.name}-account${round}`;
      servers.push({ name, ...(s.description ? { description: s.description } : {}) });
      for (const t of s.tools)
        if (tools.length < size)
          tools.push({ name: t.name, description: t.description ?? "", parameters: t.inputSchema ?? { type: "object" }, source: "mcp", owner: name });
    }
  }
  return { tools, servers };
}

/** A "search index built" (or "catalog view cached") log line of the sidecar, parsed. */
export type IndexLogLine = {
  msg: string;
  catalogVersion?: string;
  tools?: number;
  thread?: string;
  indexBuildMs?: number;
  mainThreadMs?: number;
  time: number;
};
export const parseLogLine = (line: string) => JSON.parse(line) as IndexLogLine;

// The 2,000-tool inline catalog of bench/exec-latency.bench.mjs: echo and rows (the small
// catalog's two tools), the hand-written gateway tools of bench/fixtures/gateway-tools.json,
// then the real tool lists of public MCP servers in bench/fixtures/mcp-catalog.json, padded
// (only if short) with copies of the largest servers under "<server>-account<k>", as
// bench/search-quality.bench.mjs builds its catalog. Real names, descriptions and schemas.
import { readFileSync } from "node:fs";
import { TWO_TOOLS } from "./workloads.mjs";

const fixture = (name) => JSON.parse(readFileSync(new URL(`../fixtures/${name}`, import.meta.url), "utf8"));

export function largeCatalog(size = 2000) {
  const gateway = fixture("gateway-tools.json");
  const mcp = fixture("mcp-catalog.json");
  const tools = [...TWO_TOOLS];
  const servers = new Map();
  for (const t of gateway.tools) {
    if (tools.length >= size) break;
    if (t.name === "echo" || t.name === "rows") continue;
    tools.push({
      name: t.name,
      label: t.label ?? "",
      description: t.description ?? "",
      parametersJson: JSON.stringify(t.parameters ?? { type: "object" }),
      source: 1,
      sourceName: "core",
      origin: 1,
    });
  }
  const addServer = (s, name) => {
    if (!servers.has(name))
      servers.set(name, { name, serverId: s.package ?? s.name, title: s.name, version: s.version ?? "", description: s.description ?? "" });
  };
  const addMcp = (s, name, t) => {
    addServer(s, name);
    const tool = {
      name: t.name,
      description: t.description ?? "",
      parametersJson: JSON.stringify(t.inputSchema ?? { type: "object" }),
      source: 2,
      sourceName: name,
    };
    if (typeof t.annotations?.title === "string") tool.label = t.annotations.title;
    tools.push(tool);
  };
  for (const s of mcp.servers) for (const t of s.tools) if (tools.length < size) addMcp(s, s.name, t);
  const bySize = [...mcp.servers].sort((a, b) => b.tools.length - a.tools.length || (a.name < b.name ? -1 : 1));
  for (let round = 2; tools.length < size && round < 10; round++) {
    for (const s of bySize) for (const t of s.tools) if (tools.length < size) addMcp(s, `${s.name}-account${round}`, t);
  }
  return { tools, mcpServers: [...servers.values()] };
}

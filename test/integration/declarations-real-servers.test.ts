/**
 * Declarations for real MCP servers: start the public reference servers installed as
 * devDependencies over stdio, list their tools with the MCP SDK client, assign
 * identifiers, render `mcp/index.d.ts` plus one file per server, and prove that all
 * files type-check together under strict with a usage program, that every tool has its
 * function, and that annotations and output schemas show up.
 */
import { readFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { assignIdentifiers, MCP_MEMBER_RESERVED, MCP_SERVER_RESERVED } from "../../src/shared/declarations/identifiers.js";
import { renderIndexFile, renderServerFile, type McpServerDecl, type McpToolAnnotations, type McpToolDecl } from "../../src/sandbox/catalog/mcp-api-files.js";
import { typecheck } from "../helpers/typecheck.js";

const PACKAGES = ["everything", "filesystem", "memory", "sequential-thinking", "github", "gitlab", "slack", "brave-search", "google-maps"];
const DUMMY_ENV = {
  GITHUB_PERSONAL_ACCESS_TOKEN: "x",
  SLACK_BOT_TOKEN: "x",
  SLACK_TEAM_ID: "x",
  GITLAB_PERSONAL_ACCESS_TOKEN: "x",
  BRAVE_API_KEY: "x",
  GOOGLE_MAPS_API_KEY: "x",
};

type Listed = { name: string; client: Client; tools: Tool[]; title?: string; version: string; instructions?: string; resources: boolean; prompts: boolean };

const workDir = mkdtempSync(join(tmpdir(), "decl-real-"));
const clients: Client[] = [];
const listed: Listed[] = [];

function binOf(pkg: string): string {
  const dir = fileURLToPath(new URL(`../../node_modules/@modelcontextprotocol/server-${pkg}/`, import.meta.url));
  const manifest = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as { bin: string | Record<string, string> };
  const bin = typeof manifest.bin === "string" ? manifest.bin : Object.values(manifest.bin)[0];
  if (!bin) throw new Error(`no bin in @modelcontextprotocol/server-${pkg}`);
  return join(dir, bin);
}

async function start(pkg: string): Promise<Listed> {
  const args = [binOf(pkg), ...(pkg === "filesystem" ? [workDir] : [])];
  const transport = new StdioClientTransport({ command: process.execPath, args, env: { ...getDefaultEnvironment(), ...DUMMY_ENV }, stderr: "ignore" });
  const client = new Client({ name: "declarations-test", version: "1.0.0" });
  clients.push(client);
  await client.connect(transport, { timeout: 90_000 });
  const tools: Tool[] = [];
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor === undefined ? {} : { cursor }, { timeout: 90_000 });
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  const info = client.getServerVersion();
  const caps = client.getServerCapabilities() ?? {};
  const out: Listed = { name: pkg, client, tools, version: info?.version ?? "", resources: caps.resources !== undefined, prompts: caps.prompts !== undefined };
  if (info?.title) out.title = info.title;
  const instructions = client.getInstructions();
  if (instructions) out.instructions = instructions;
  return out;
}

function annotationsOf(tool: Tool): McpToolAnnotations | undefined {
  const a = tool.annotations;
  if (!a) return undefined;
  const out: McpToolAnnotations = {};
  if (typeof a.title === "string") out.title = a.title;
  if (typeof a.readOnlyHint === "boolean") out.readOnlyHint = a.readOnlyHint;
  if (typeof a.destructiveHint === "boolean") out.destructiveHint = a.destructiveHint;
  if (typeof a.idempotentHint === "boolean") out.idempotentHint = a.idempotentHint;
  if (typeof a.openWorldHint === "boolean") out.openWorldHint = a.openWorldHint;
  return out;
}

type Rendered = { server: McpServerDecl; tools: McpToolDecl[]; source: Tool[]; path: string; text: string };
let rendered: Rendered[] = [];
let files: Record<string, string> = {};

beforeAll(async () => {
  // Sequential starts: gentler on a loaded 2-core machine than nine processes at once.
  for (const pkg of PACKAGES) listed.push(await start(pkg));
  const keys = assignIdentifiers(
    listed.map((l) => l.name),
    "camel",
    MCP_SERVER_RESERVED,
  );
  rendered = listed.map((l) => {
    const fns = assignIdentifiers(
      l.tools.map((t) => t.name),
      "camel",
      MCP_MEMBER_RESERVED,
    );
    const server: McpServerDecl = { key: keys.get(l.name) ?? "", name: l.name, version: l.version, resources: l.resources, prompts: l.prompts };
    if (l.title) server.title = l.title;
    if (l.instructions) server.instructions = l.instructions;
    const tools = l.tools.map((t) => {
      const decl: McpToolDecl = {
        id: `mcp:${l.name}:${t.name}`,
        name: t.name,
        functionName: fns.get(t.name) ?? "",
        description: t.description ?? "",
        inputSchema: t.inputSchema,
      };
      if (t.outputSchema) decl.outputSchema = t.outputSchema;
      const annotations = annotationsOf(t);
      if (annotations) decl.annotations = annotations;
      return decl;
    });
    const path = `mcp/${server.key}.d.ts`;
    return { server, tools, source: l.tools, path, text: renderServerFile(server, tools) };
  });
  files = { "mcp/index.d.ts": renderIndexFile(rendered.map((r) => ({ server: r.server, tools: r.tools }))) };
  for (const r of rendered) files[r.path] = r.text;
}, 600_000);

afterAll(async () => {
  await Promise.allSettled(clients.map((c) => c.close()));
  rmSync(workDir, { recursive: true, force: true });
}, 120_000);

/** The blank-line separated block (aliases, doc comment, declaration) of one function. */
function blockOf(text: string, functionName: string): string {
  return text.split("\n\n").find((b) => b.includes(`\n  function ${functionName}(`) || b.startsWith(`  function ${functionName}(`)) ?? "";
}

const USAGE = `
async function main(): Promise<void> {
  const echoed = await MCP.everything.echo({ message: "hi" });
  const content: unknown[] | undefined = echoed.content;
  // @ts-expect-error message is required
  await MCP.everything.echo({});
  // @ts-expect-error message is a string
  await MCP.everything.echo({ message: 1 });
  await MCP.everything.getSum({ a: 1, b: 2 });
  const weather = await MCP.everything.getStructuredContent({ location: "Chicago" });
  const temperature: number | undefined = weather.structuredContent?.temperature;
  // @ts-expect-error location is an enum
  await MCP.everything.getStructuredContent({ location: "Paris" });
  await MCP.everything.getEnv();
  const prompts = await MCP.everything.prompts.list();
  await MCP.everything.resources.read({ uri: "demo://resource/static/document/architecture.md" });
  const file = await MCP.filesystem.readTextFile({ path: "README.md", head: 5 });
  const text: string | undefined = file.structuredContent?.content;
  await MCP.memory.createEntities({ entities: [{ name: "a", entityType: "person", observations: [] }] });
  // @ts-expect-error observations are strings
  await MCP.memory.createEntities({ entities: [{ name: "a", entityType: "person", observations: [1] }] });
  await MCP.github.createIssue({ owner: "o", repo: "r", title: "t", labels: ["bug"] });
  // @ts-expect-error title is required
  await MCP.github.createIssue({ owner: "o", repo: "r" });
  await MCP.braveSearch.braveWebSearch({ query: "mcp" });
  await MCP.slack.slackPostMessage({ channel_id: "C1", text: "hello" });
  await MCP.googleMaps.mapsGeocode({ address: "Paris" });
  await MCP.sequentialThinking.$api("sequentialthinking", { schema: true });
  void [content, temperature, prompts, text];
}
void main;
`;

describe("declarations for real MCP servers", () => {
  it("starts the servers and lists their tools", () => {
    expect(listed.map((l) => l.name)).toEqual(PACKAGES);
    for (const l of listed) expect(l.tools.length, l.name).toBeGreaterThan(0);
    const everything = listed.find((l) => l.name === "everything");
    expect(everything?.tools.some((t) => t.outputSchema)).toBe(true);
    expect(everything?.tools.some((t) => t.annotations)).toBe(true);
  });

  it("all files type-check together under strict, with a usage program", () => {
    expect(typecheck({ ...files, "usage.ts": USAGE })).toEqual([]);
    expect(typecheck({ ...files, "usage.ts": USAGE }, { exactOptionalPropertyTypes: true, noUncheckedIndexedAccess: true })).toEqual([]);
  });

  it("every tool has its documented function in its server's file, and the index lists every server", () => {
    expect(rendered.map((r) => r.server.name)).toEqual(PACKAGES);
    for (const r of rendered) {
      expect(files["mcp/index.d.ts"]).toContain(`- MCP.${r.server.key} (${r.path}, ${r.tools.length} tool`);
      expect(r.text).toContain(`declare namespace MCP.${r.server.key} {`);
      for (const t of r.tools) {
        const block = blockOf(r.text, t.functionName);
        expect(block, `${r.server.name}/${t.name}`).toContain(`catalog id ${t.id}.`);
      }
      expect(r.text.includes("namespace resources {"), r.server.name).toBe(r.server.resources);
      expect(r.text.includes("namespace prompts {"), r.server.name).toBe(r.server.prompts);
    }
  });

  it("annotations and output types show up", () => {
    let annotated = 0;
    let typedOutputs = 0;
    for (const r of rendered) {
      for (const [i, t] of r.tools.entries()) {
        const block = blockOf(r.text, t.functionName);
        const a = t.annotations;
        if (a?.readOnlyHint === true) expect(block, t.id).toContain("@readOnly");
        if (a?.destructiveHint === true) expect(block, t.id).toContain("@destructive");
        if (a?.idempotentHint === true) expect(block, t.id).toContain("@idempotent");
        if (a?.openWorldHint === true) expect(block, t.id).toContain("@openWorld");
        if (a?.openWorldHint === false) expect(block, t.id).toContain("openWorldHint: false");
        if (a && Object.keys(a).length > 0) annotated++;
        if (r.source[i]?.outputSchema) {
          expect(block, t.id).toMatch(/Promise<McpToolResult<[^>]/);
          typedOutputs++;
        } else {
          expect(block, t.id).toContain("Promise<McpToolResult>;");
        }
      }
    }
    expect(annotated).toBeGreaterThan(10);
    expect(typedOutputs).toBeGreaterThan(5);
    const everything = rendered.find((r) => r.server.name === "everything");
    const structured = blockOf(everything?.text ?? "", "getStructuredContent");
    expect(structured).toContain("Promise<McpToolResult<{");
    expect(structured).toContain("temperature: number;");
    expect(blockOf(everything?.text ?? "", "echo")).toContain("@readOnly @idempotent (destructiveHint: false, openWorldHint: false)");
  });

  it("rendering is deterministic", () => {
    expect(rendered.map((r) => r.server.name)).toEqual(PACKAGES);
    for (const r of rendered) expect(renderServerFile(r.server, [...r.tools].reverse())).toBe(r.text);
  });
});

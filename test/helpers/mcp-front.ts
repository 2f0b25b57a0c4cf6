/**
 * Drives `codemode mcp` for the Code Mode for MCP conformance suite: writes a config with
 * real upstream servers (@modelcontextprotocol/server-everything and the fixture server of
 * test/fixtures/mcp-fixture-server.mjs), starts the front as a child process, and connects
 * the official MCP SDK client to it over stdio (the SDK spawns it) or streamable HTTP.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import { BIN, spawnCodemode, type Proc } from "./harness.js";

export const EVERYTHING = fileURLToPath(new URL("../../node_modules/@modelcontextprotocol/server-everything/dist/index.js", import.meta.url));
export const FIXTURE = fileURLToPath(new URL("../fixtures/mcp-fixture-server.mjs", import.meta.url));

export type RunResponse = {
  logs: Array<{ level: string; message: string; timeMs: number }>;
  result: unknown;
  diagnostics: Array<{ severity: string; code: string; message: string; hint?: string; path?: string; errorClass?: string }>;
  toolTrace?: Array<{ serverId: string; toolName: string; durationMs: number; ok: boolean; error?: string }>;
};

/** The two stdio upstreams most tests use: `everything` and `fixture`. */
export function standardServers(): Record<string, unknown> {
  return {
    everything: { command: process.execPath, args: [EVERYTHING, "stdio"] },
    fixture: { command: process.execPath, args: [FIXTURE, "--name", "fixture-server"] },
  };
}

export function writeConfig(servers: Record<string, unknown>): string {
  const dir = mkdtempSync(join(tmpdir(), "codemode-mcp-"));
  const path = join(dir, "mcp.json");
  writeFileSync(path, JSON.stringify({ mcpServers: servers }, null, 2));
  return path;
}

export type Front = {
  client: Client;
  /** The raw MCP result of one codemode.run call. */
  call(args: Record<string, unknown>, options?: { signal?: AbortSignal; timeout?: number }): Promise<CallToolResult>;
  /** One codemode.run call's response (its structuredContent, checked against the text block). */
  run(code: string, extra?: Record<string, unknown>): Promise<RunResponse>;
  tool(): Promise<Tool>;
  stderr: string[];
  close(): Promise<void>;
};

function front(client: Client, stderr: string[], close: () => Promise<void>): Front {
  const call = async (args: Record<string, unknown>, options: { signal?: AbortSignal; timeout?: number } = {}) =>
    (await client.callTool({ name: "codemode.run", arguments: args }, undefined, {
      timeout: options.timeout ?? 60_000,
      ...(options.signal ? { signal: options.signal } : {}),
    })) as CallToolResult;
  return {
    client,
    call,
    async run(code, extra = {}) {
      const res = await call({ code, ...extra });
      if (res.isError) throw new Error(`codemode.run returned a tool error: ${JSON.stringify(res.content)}`);
      const text = (res.content[0] as { text: string }).text;
      const structured = res.structuredContent as RunResponse;
      if (JSON.stringify(JSON.parse(text)) !== JSON.stringify(structured)) throw new Error("text and structuredContent differ");
      return structured;
    },
    async tool() {
      const { tools } = await client.listTools();
      if (tools.length !== 1) throw new Error(`expected exactly one tool, got ${tools.map((t) => t.name).join(", ")}`);
      return tools[0]!;
    },
    stderr,
    close,
  };
}

/** `codemode mcp --config FILE` over stdio, spawned by the SDK client. */
export async function startStdioFront(servers: Record<string, unknown> = standardServers(), extraArgs: string[] = []): Promise<Front> {
  const config = writeConfig(servers);
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [BIN, "mcp", "--config", config, "--threads", "1", ...extraArgs],
    stderr: "pipe",
    env: { ...process.env, CODEMODE_LOG_LEVEL: "info" } as Record<string, string>,
  });
  const stderr: string[] = [];
  if (transport.stderr) createInterface({ input: transport.stderr as unknown as NodeJS.ReadableStream }).on("line", (l) => stderr.push(l));
  const client = new Client({ name: "conformance-test", version: "1.0.0" });
  await client.connect(transport, { timeout: 60_000 });
  return front(client, stderr, () => client.close());
}

/** `codemode mcp --config FILE --http 127.0.0.1:0` as a child process, and an SDK client over streamable HTTP. */
export async function startHttpFront(
  servers: Record<string, unknown> = standardServers(),
  extraArgs: string[] = [],
  env: Record<string, string> = {},
): Promise<Front & { proc: Proc; url: string }> {
  const config = writeConfig(servers);
  const proc = await spawnCodemode(["mcp", "--config", config, "--http", "127.0.0.1:0", "--threads", "1", ...extraArgs], env);
  const url = proc.ready.mcp!;
  const client = new Client({ name: "conformance-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)), { timeout: 60_000 });
  const f = front(client, proc.stderr, async () => {
    await client.close().catch(() => undefined);
    await proc.stop();
  });
  return { ...f, proc, url };
}

/** The fixture server over streamable HTTP (with a bearer token), for `url`/`headers` configs; `stop` resolves once its process is gone. */
export async function startHttpFixture(token: string): Promise<{ url: string; stop(): Promise<void> }> {
  const child = spawn(process.execPath, [FIXTURE, "--name", "fixture-http", "--http", "0", "--token", token], { stdio: ["ignore", "pipe", "inherit"] });
  const port = await new Promise<string>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on("line", (l) => l.startsWith("ready port=") && resolve(l.slice("ready port=".length)));
    child.once("exit", (code) => reject(new Error(`the HTTP fixture exited ${code}`)));
  });
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    stop: () => {
      child.kill("SIGTERM");
      return exited;
    },
  };
}

/** The TypeScript block of the codemode.run description. */
export function declarationsOf(description: string): string {
  const m = /```ts\n([\s\S]*?)\n```/.exec(description);
  if (!m) throw new Error("the description has no ```ts block");
  return m[1]!;
}

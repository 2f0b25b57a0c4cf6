/**
 * One upstream MCP server of the front, through the official SDK client: stdio (the
 * front starts the command) or streamable HTTP (SSE when the config says so). It lists
 * the server's tools (every page) and capabilities, follows `notifications/tools/
 * list_changed` by listing again, forwards tool calls (with cancellation: an aborted call
 * sends MCP's `notifications/cancelled`), and when the connection fails or drops it
 * reconnects with exponential backoff (FIRST_RETRY_MS doubling to MAX_RETRY_MS, with
 * jitter). Every change of what the server offers is reported through `onChange`.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { getDefaultEnvironment, StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { SSEClientTransport } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  ToolListChangedNotificationSchema,
  type CallToolResult,
  type Implementation,
  type ServerCapabilities,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import type { Logger } from "../shared/logger.js";
import type { UpstreamSpec } from "./config.js";

export type UpstreamState = "connecting" | "connected" | "disconnected" | "closed";

/** A failure answered to the sandbox as `{name, message}` (the guest maps the name to an @codemode/errors class). */
export class UpstreamCallError extends Error {
  constructor(
    override readonly name: "ServerNotFoundError" | "AuthenticationError" | "ToolCallError",
    message: string,
  ) {
    super(message);
  }
}

const FIRST_RETRY_MS = 500;
const MAX_RETRY_MS = 30_000;
const CONNECT_TIMEOUT_MS = 20_000;

function isAuthFailure(err: unknown): boolean {
  if (err instanceof UnauthorizedError) return true;
  if (err instanceof StreamableHTTPError) return err.code === 401 || err.code === 403;
  return /\b(401|403)\b|unauthori[sz]ed|forbidden/i.test((err as Error)?.message ?? "");
}

export class Upstream {
  state: UpstreamState = "connecting";
  tools: Tool[] = [];
  info: Implementation | undefined;
  instructions = "";
  capabilities: ServerCapabilities = {};
  /** Why the last connection attempt failed ("" when connected). */
  lastError = "";
  private authFailed = false;
  private client: Client | undefined;
  private retryMs = FIRST_RETRY_MS;
  private retryTimer: NodeJS.Timeout | undefined;
  private refreshing: Promise<void> | undefined;
  private refreshAgain = false;
  private waiters: Array<() => void> = [];

  constructor(
    readonly name: string,
    private readonly spec: UpstreamSpec,
    private readonly log: Logger,
    private readonly onChange: () => void,
    private readonly clientInfo: { name: string; version: string },
  ) {}

  /** Starts connecting; resolves when the first attempt has succeeded or failed. */
  start(): Promise<void> {
    return this.connect();
  }

  private transport(): Transport {
    const s = this.spec;
    if (s.kind === "stdio") {
      const t = new StdioClientTransport({
        command: s.command,
        args: s.args,
        env: { ...getDefaultEnvironment(), ...s.env },
        ...(s.cwd ? { cwd: s.cwd } : {}),
        stderr: "pipe",
      });
      t.stderr?.on("data", (chunk: Buffer) => this.log.debug({ server: this.name, stderr: chunk.toString("utf8").slice(0, 2000) }, "upstream stderr"));
      return t;
    }
    const requestInit = { headers: s.headers };
    return s.kind === "sse" ? new SSEClientTransport(new URL(s.url), { requestInit }) : new StreamableHTTPClientTransport(new URL(s.url), { requestInit });
  }

  private async connect(): Promise<void> {
    if (this.state === "closed") return;
    this.state = "connecting";
    const client = new Client(this.clientInfo, { capabilities: {} });
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      this.log.info({ server: this.name }, "upstream tool list changed; listing again");
      void this.refresh();
    });
    try {
      await client.connect(this.transport(), { timeout: CONNECT_TIMEOUT_MS });
      this.client = client;
      this.info = client.getServerVersion();
      this.instructions = client.getInstructions() ?? "";
      this.capabilities = client.getServerCapabilities() ?? {};
      this.tools = await this.listAll(client);
      client.onclose = () => this.dropped(client);
      this.state = "connected";
      this.lastError = "";
      this.authFailed = false;
      this.retryMs = FIRST_RETRY_MS;
      this.log.info({ server: this.name, tools: this.tools.length, serverInfo: this.info?.name }, "upstream MCP server connected");
      this.changed();
    } catch (err) {
      this.authFailed = isAuthFailure(err);
      this.lastError = (err as Error)?.message ?? String(err);
      await client.close().catch(() => undefined);
      this.log.warn({ server: this.name, err: this.lastError, retryInMs: this.retryMs }, "upstream MCP server unavailable");
      this.state = "disconnected";
      this.scheduleRetry();
      this.wake();
    }
  }

  private async listAll(client: Client): Promise<Tool[]> {
    if (!client.getServerCapabilities()?.tools) return [];
    const out: Tool[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 100; page++) {
      const res = await client.listTools(cursor ? { cursor } : {});
      out.push(...res.tools);
      cursor = res.nextCursor;
      if (!cursor) break;
    }
    return out;
  }

  private dropped(client: Client): void {
    if (this.client !== client || this.state === "closed") return;
    this.client = undefined;
    this.state = "disconnected";
    this.lastError = "the connection closed";
    this.log.warn({ server: this.name }, "upstream MCP server disconnected; reconnecting");
    this.changed();
    this.scheduleRetry();
  }

  private scheduleRetry(): void {
    if (this.state === "closed" || this.retryTimer) return;
    const delay = Math.round(this.retryMs * (0.75 + Math.random() * 0.5));
    this.retryMs = Math.min(MAX_RETRY_MS, this.retryMs * 2);
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.connect();
    }, delay);
    this.retryTimer.unref();
  }

  private changed(): void {
    this.wake();
    this.onChange();
  }

  private wake(): void {
    const w = this.waiters.splice(0);
    for (const f of w) f();
  }

  /** Lists the tools again (list_changed); calls made meanwhile wait for it through `fresh()`. */
  refresh(): Promise<void> {
    if (this.refreshing) {
      this.refreshAgain = true;
      return this.refreshing;
    }
    this.refreshing = (async () => {
      do {
        this.refreshAgain = false;
        const client = this.client;
        if (!client) return;
        try {
          this.tools = await this.listAll(client);
          this.changed();
        } catch (err) {
          this.log.warn({ server: this.name, err: (err as Error).message }, "could not list the upstream's tools again");
        }
      } while (this.refreshAgain);
    })().finally(() => (this.refreshing = undefined));
    return this.refreshing;
  }

  /** Resolves once no tool list refresh is in flight. */
  async fresh(): Promise<void> {
    while (this.refreshing) await this.refreshing;
  }

  /** Connects now if not connected (a requested capability), trying again until `timeoutMs` passes. */
  async ensureConnected(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!this.connected && this.state !== "closed" && Date.now() < deadline) {
      if (this.state === "disconnected") {
        if (this.retryTimer) clearTimeout(this.retryTimer);
        this.retryTimer = undefined;
        void this.connect();
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.max(0, deadline - Date.now()));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      if (!this.connected && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    }
    return this.connected;
  }

  get connected(): boolean {
    return this.state === "connected";
  }

  async callTool(toolName: string, args: unknown, signal: AbortSignal, timeoutMs: number): Promise<CallToolResult> {
    const client = this.client;
    if (!client || this.state !== "connected") {
      if (this.authFailed) throw new UpstreamCallError("AuthenticationError", `MCP server ${this.name} rejected the front's credentials: ${this.lastError}`);
      throw new UpstreamCallError(
        "ServerNotFoundError",
        `MCP server ${this.name} is not connected (${this.lastError || "connecting"}); the front keeps reconnecting.`,
      );
    }
    try {
      const res = await client.callTool({ name: toolName, arguments: args as Record<string, unknown> }, undefined, { signal, timeout: timeoutMs });
      return res as CallToolResult;
    } catch (err) {
      if (isAuthFailure(err))
        throw new UpstreamCallError("AuthenticationError", `MCP server ${this.name} rejected the call for its credentials: ${(err as Error).message}`);
      throw new UpstreamCallError("ToolCallError", (err as Error)?.message ?? String(err));
    }
  }

  async close(): Promise<void> {
    this.state = "closed";
    if (this.retryTimer) clearTimeout(this.retryTimer);
    const client = this.client;
    this.client = undefined;
    this.wake();
    await client?.close().catch(() => undefined);
  }
}

/**
 * The MCP server side of the front, with the official SDK: exactly one tool,
 * `codemode.run`, over stdio or streamable HTTP (one SDK Server per HTTP session, at
 * `/mcp`). A call's arguments go to the gateway untouched and its response comes back as
 * both `structuredContent` and a JSON text block; a failing script is a normal (non-error)
 * result, as the spec requires. When the tool's description changes (upstream tools
 * changed), every connected client gets `notifications/tools/list_changed`.
 */
import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from "node:http";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ErrorCode, ListToolsRequestSchema, McpError, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { HostPort } from "../shared/address.js";
import type { Logger } from "../shared/logger.js";
import { RUN_TOOL_NAME, type FrontGateway } from "./gateway.js";

const MAX_BODY_BYTES = 4 * 1024 * 1024;
const INSTRUCTIONS = `This server exposes one tool, ${RUN_TOOL_NAME}: write a JavaScript ES module that imports @codemode/servers/<serverId> and calls the upstream MCP tools as async functions. Its description documents the sandbox and declares every server's functions.`;

export class FrontServers {
  private readonly live = new Set<Server>();

  constructor(
    private readonly gateway: FrontGateway,
    private readonly log: Logger,
    private readonly version: string,
  ) {}

  /** A new SDK server (one per stdio connection or HTTP session). */
  create(): Server {
    const server = new Server({ name: "codemode", version: this.version }, { capabilities: { tools: { listChanged: true } }, instructions: INSTRUCTIONS });
    server.setRequestHandler(ListToolsRequestSchema, async () => {
      const t = await this.gateway.toolDefinition();
      return {
        tools: [
          { name: t.name, description: t.description, inputSchema: t.inputSchema as { type: "object" }, outputSchema: t.outputSchema as { type: "object" } },
        ],
      };
    });
    server.setRequestHandler(CallToolRequestSchema, async (req, extra): Promise<CallToolResult> => {
      if (req.params.name !== RUN_TOOL_NAME)
        throw new McpError(ErrorCode.InvalidParams, `unknown tool ${JSON.stringify(req.params.name)}: this server has one tool, ${RUN_TOOL_NAME}`);
      const response = await this.gateway.run(req.params.arguments ?? {}, extra.signal, extra.sessionId ?? "stdio");
      return { content: [{ type: "text", text: JSON.stringify(response) }], structuredContent: response };
    });
    this.live.add(server);
    server.onclose = () => this.live.delete(server);
    return server;
  }

  /** Tells every connected client that the tool list (the description) changed. */
  notifyToolsChanged(): void {
    for (const s of this.live) void s.sendToolListChanged().catch(() => undefined);
  }

  async serveStdio(onClose: () => void): Promise<void> {
    const server = this.create();
    const forget = server.onclose;
    server.onclose = () => {
      forget?.();
      onClose();
    };
    await server.connect(new StdioServerTransport());
    process.stdin.once("end", onClose);
  }

  /** Streamable HTTP at `/mcp`, stateful sessions. Resolves with the bound address. */
  async serveHttp(listen: HostPort): Promise<{ url: string; close(): Promise<void> }> {
    const sessions = new Map<string, StreamableHTTPServerTransport>();
    const http: HttpServer = createServer((req, res) => {
      void this.handle(req, res, sessions).catch((err: unknown) => {
        this.log.warn({ err: (err as Error).message }, "MCP HTTP request failed");
        if (!res.headersSent) res.writeHead(500).end();
      });
    });
    await new Promise<void>((resolve, reject) => {
      http.once("error", reject);
      http.listen(listen.port, listen.host, () => resolve());
    });
    const addr = http.address();
    const port = typeof addr === "object" && addr ? addr.port : listen.port;
    const host = listen.host.includes(":") && !listen.host.startsWith("[") ? `[${listen.host}]` : listen.host;
    return {
      url: `http://${host}:${port}/mcp`,
      close: async () => {
        for (const t of sessions.values()) await t.close().catch(() => undefined);
        http.closeAllConnections();
        await new Promise<void>((resolve) => http.close(() => resolve()));
      },
    };
  }

  private async handle(req: IncomingMessage, res: ServerResponse, sessions: Map<string, StreamableHTTPServerTransport>): Promise<void> {
    const path = (req.url ?? "/").split("?")[0];
    if (path !== "/mcp") {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found: the MCP endpoint is /mcp\n");
      return;
    }
    const sid = req.headers["mcp-session-id"];
    const existing = typeof sid === "string" ? sessions.get(sid) : undefined;
    let body: unknown;
    if (req.method === "POST") {
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const c of req) {
        size += (c as Buffer).length;
        if (size > MAX_BODY_BYTES) {
          res.writeHead(413).end();
          return;
        }
        chunks.push(c as Buffer);
      }
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8")) as unknown;
      } catch {
        res
          .writeHead(400, { "content-type": "application/json" })
          .end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32700, message: "Parse error" }, id: null }));
        return;
      }
    }
    if (existing) {
      await existing.handleRequest(req, res, body);
      return;
    }
    if (typeof sid === "string") {
      res
        .writeHead(404, { "content-type": "application/json" })
        .end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32001, message: "unknown session" }, id: null }));
      return;
    }
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => void sessions.set(id, transport),
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await this.create().connect(transport);
    await transport.handleRequest(req, res, body);
  }
}

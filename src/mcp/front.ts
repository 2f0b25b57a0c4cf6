/**
 * Starts the MCP front (`codemode mcp`): an MCP server exposing `codemode.run` over the
 * upstream MCP servers of a config file. By default it embeds its own orchestrator and
 * sandbox sidecar on loopback ports (the same start functions `codemode start` uses);
 * given `sandbox` and `orchestrator` addresses it uses remote ones instead. Importable:
 * `startMcpFront(options)` returns the HTTP URL (when serving HTTP) and `close()`.
 */
import { Control } from "../gen/codemode/orchestrator/v1/control_pb.js";
import { Sandbox } from "../gen/codemode/sandbox/v1/sandbox_pb.js";
import { startOrchestrator } from "../orchestrator/server.js";
import type { ClientSecurity } from "../protocol/credentials.js";
import { createClient } from "../protocol/grpc-client.js";
import { startSandbox, VERSION } from "../sandbox/server.js";
import type { HostPort } from "../shared/address.js";
import type { Logger } from "../shared/logger.js";
import { catalogNames } from "./catalog.js";
import type { FrontConfig } from "./config.js";
import { FrontGateway, type FrontLimits, type Member } from "./gateway.js";
import { FrontServers } from "./server.js";
import { Upstream } from "./upstream.js";

export type McpFrontOptions = {
  config: FrontConfig;
  log: Logger;
  /** Serve streamable HTTP here; otherwise stdio (the process's stdin/stdout). */
  http?: HostPort;
  /** Remote sidecar and orchestrator (Control) addresses, and how to reach them (TLS, bearer token); both or neither. */
  remote?: { sandbox: string; orchestrator: string; security?: ClientSecurity };
  limits: FrontLimits;
  threads?: number;
  /** stdio only: called when the client goes away (stdin closed). */
  onStdioClosed?: () => void;
};

export type RunningMcpFront = { url?: string; close(): Promise<void> };

/** How long start-up waits for the upstream servers' first connection attempts. */
const FIRST_CONNECT_MS = 15_000;

export async function startMcpFront(options: McpFrontOptions): Promise<RunningMcpFront> {
  const { log } = options;
  const closers: Array<() => Promise<void>> = [];
  const close = async () => {
    for (const c of closers.splice(0).reverse()) await c().catch((err: unknown) => log.warn({ err: (err as Error).message }, "close failed"));
  };
  try {
    let sandboxAt: string;
    let controlAt: string;
    if (options.remote) {
      sandboxAt = options.remote.sandbox;
      controlAt = options.remote.orchestrator;
    } else {
      const loopback = { host: "127.0.0.1", port: 0 };
      const orchestrator = await startOrchestrator({ listen: loopback, linkListen: loopback, log: log.child({ process: "orchestrator" }) });
      closers.push(() => orchestrator.close(1_000));
      const sandbox = await startSandbox({
        listen: loopback,
        orchestrator: orchestrator.linkAddress,
        log: log.child({ process: "sandbox" }),
        singleSidecar: true,
        ...(options.threads !== undefined ? { threads: options.threads } : {}),
      });
      closers.push(() => sandbox.close(2_000));
      sandboxAt = sandbox.address;
      controlAt = orchestrator.address;
    }
    const security = options.remote?.security ?? {};
    const control = createClient(Control, controlAt, {}, security);
    const sandboxClient = createClient(Sandbox, sandboxAt, {}, security);
    closers.push(async () => {
      control.close();
      sandboxClient.close();
    });

    const names = catalogNames(options.config.servers.map((s) => s.name));
    const members: Member[] = [];
    let gateway: FrontGateway | undefined;
    const clientInfo = { name: "codemode-mcp-front", version: VERSION };
    for (const s of options.config.servers) {
      const upstream = new Upstream(s.name, s.spec, log.child({ upstream: s.name }), () => void gateway?.register(), clientInfo);
      members.push({ configName: s.name, catalogName: names.get(s.name)!, upstream });
    }
    closers.push(async () => {
      await Promise.all(members.map((m) => m.upstream.close()));
    });
    let servers: FrontServers | undefined;
    gateway = new FrontGateway(control, sandboxClient, members, options.limits, log.child({ component: "gateway" }), () => servers?.notifyToolsChanged());
    servers = new FrontServers(gateway, log.child({ component: "mcp-server" }), VERSION);
    // Serve once every upstream had its first try (a slow one joins later, announced by list_changed).
    await Promise.race([Promise.all(members.map((m) => m.upstream.start())), new Promise((r) => setTimeout(r, FIRST_CONNECT_MS).unref())]);
    await gateway.register();
    const connected = members.filter((m) => m.upstream.state === "connected").map((m) => m.configName);
    log.info({ connected, configured: members.length }, "upstream MCP servers");
    if (options.http) {
      const http = await servers.serveHttp(options.http);
      closers.push(() => http.close());
      return { url: http.url, close };
    }
    await servers.serveStdio(() => options.onStdioClosed?.());
    return { close };
  } catch (err) {
    await close();
    throw err;
  }
}

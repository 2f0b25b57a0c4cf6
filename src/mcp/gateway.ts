/**
 * The MCP front as a gateway of the sidecar, using only the public gRPC contract:
 * PutCatalog with the upstream servers' tools and McpServer metadata (again whenever what
 * they offer changes), OpenRun on the `codemode.run` surface (McpRunConfig) for each
 * invocation with a scope of its own (a fresh sandbox, fresh counters, nothing carried
 * over), Sandbox.Exec with the MCP arguments as `input_json`, and each ToolCallRequested
 * answered by calling the upstream tool and sending BridgeCallback. The model-visible
 * tool definition comes from DescribeSurface (through OpenRun's answer).
 *
 * Before each run it waits for tool-list refreshes in flight (spec 8.1: the next run sees
 * the new tools), and for requested capabilities that name a configured server that is
 * down it tries to connect first (3.2.3). A failure of the service itself still yields
 * the spec's structured response, never a tool error.
 */
import type { Control } from "../gen/codemode/orchestrator/v1/control_pb.js";
import type { Sandbox } from "../gen/codemode/sandbox/v1/sandbox_pb.js";
import type { ServiceClient } from "../protocol/grpc-client.js";
import { newId } from "../shared/ids.js";
import type { Logger } from "../shared/logger.js";
import { modulePathSegment } from "../shared/mcp-run/naming.js";
import { canonicalToolName } from "../shared/mcp-run/tool-names.js";
import { RUN_OUTPUT_SCHEMA, RUN_TOOL_NAME } from "../shared/mcp-run/tool-definition.js";
import { buildCatalog, type WireCatalog } from "./catalog.js";
import { UpstreamCallError, type Upstream } from "./upstream.js";

export type FrontLimits = { timeoutMs: number; maxMemoryBytes: number; maxLogBytes: number; maxToolCalls: number; maxConcurrentCalls: number };
export type RunToolDef = { name: string; description: string; inputSchema: Record<string, unknown>; outputSchema: Record<string, unknown> };
export type Member = { configName: string; catalogName: string; upstream: Upstream };

/** How long a run waits for a requested, disconnected server to come up. */
const CAPABILITY_CONNECT_MS = 5_000;
const AGENT_ID = "codemode-mcp";

function errorResponse(code: string, message: string, hint: string): Record<string, unknown> {
  return { logs: [], result: null, diagnostics: [{ severity: "error", code, message, hint }], toolTrace: [] };
}

export class FrontGateway {
  private catalogId = "";
  private tool: RunToolDef | undefined;
  private registering: Promise<void> = Promise.resolve();
  private dirty = false;
  private registeredOnce = false;

  constructor(
    private readonly control: ServiceClient<typeof Control.method>,
    private readonly sandbox: ServiceClient<typeof Sandbox.method>,
    private readonly members: readonly Member[],
    private readonly limits: FrontLimits,
    private readonly log: Logger,
    /** Called after the tool definition changed (the front tells its MCP clients). */
    private readonly onToolChanged: () => void,
  ) {}

  private openRunFields() {
    return {
      policy: { allow: [], deny: [], allowNone: false },
      config: {
        timeoutMs: this.limits.timeoutMs,
        memoryLimitBytes: BigInt(this.limits.maxMemoryBytes),
        maxPendingToolCalls: this.limits.maxConcurrentCalls,
        maxToolCallsPerRun: 100_000,
        maxSearchesPerRun: 100_000,
      },
      mcpRun: { enabled: true, maxLogBytes: BigInt(this.limits.maxLogBytes), maxToolCalls: this.limits.maxToolCalls },
    };
  }

  /** Registers the current catalog (coalescing bursts); resolves when it is in place. */
  register(): Promise<void> {
    this.dirty = true;
    this.registering = this.registering.then(async () => {
      if (!this.dirty) return;
      this.dirty = false;
      const catalog: WireCatalog = buildCatalog(
        this.members.map((m) => ({ catalogName: m.catalogName, upstream: m.upstream })),
        this.log,
      );
      try {
        const put = await this.control.putCatalog(catalog);
        const scope = { agentId: AGENT_ID, sessionId: "describe", sessionKey: "describe", agentRunId: "describe" };
        const opened = await this.control.openRun({ scope, catalog: { case: "catalogId", value: put.catalogId }, ...this.openRunFields() });
        const t = opened.surface?.tools[0];
        if (!t) throw new Error(`the orchestrator gave no codemode.run tool (surface kind ${opened.surface?.kind})`);
        const changed = put.catalogId !== this.catalogId;
        this.catalogId = put.catalogId;
        this.tool = {
          name: t.name,
          description: t.description,
          inputSchema: JSON.parse(t.inputSchemaJson) as Record<string, unknown>,
          outputSchema: RUN_OUTPUT_SCHEMA as unknown as Record<string, unknown>,
        };
        this.log.info({ catalogId: put.catalogId, tools: catalog.tools.length, servers: catalog.mcpServers.length }, "catalog registered");
        if (changed && this.registeredOnce) this.onToolChanged();
        this.registeredOnce = true;
      } catch (err) {
        this.log.error({ err: (err as Error).message }, "could not register the catalog with the orchestrator");
      }
    });
    return this.registering;
  }

  /** The `codemode.run` definition for tools/list. */
  async toolDefinition(): Promise<RunToolDef> {
    await this.registering;
    if (!this.tool) throw new Error("the codemode.run tool is not available: the orchestrator could not be reached");
    return this.tool;
  }

  private member(capability: string): Member | undefined {
    const id = capability.startsWith("@codemode/servers/") ? capability.slice("@codemode/servers/".length) : capability;
    return this.members.find((m) => m.configName === id || m.catalogName === id || modulePathSegment(m.catalogName) === id);
  }

  /** One `codemode.run` invocation: always a structured response. */
  async run(args: unknown, signal: AbortSignal, sessionId: string): Promise<Record<string, unknown>> {
    const caps =
      args !== null && typeof args === "object" && Array.isArray((args as { requestedCapabilities?: unknown }).requestedCapabilities)
        ? ((args as { requestedCapabilities: unknown[] }).requestedCapabilities.filter((c) => typeof c === "string") as string[])
        : [];
    const wanted = [...new Set(caps.map((c) => this.member(c)).filter((m): m is Member => m !== undefined && m.upstream.state !== "connected"))];
    if (wanted.length > 0) {
      const ok = await Promise.all(wanted.map((m) => m.upstream.ensureConnected(CAPABILITY_CONNECT_MS)));
      if (ok.some(Boolean)) await this.register();
    }
    await Promise.all(this.members.map((m) => m.upstream.fresh()));
    await this.registering;
    if (!this.catalogId) return errorResponse("RUNTIME_UNAVAILABLE", "codemode.run is unavailable: the orchestrator could not be reached.", "Retry shortly.");
    const scope = { agentId: AGENT_ID, sessionId, sessionKey: sessionId, agentRunId: newId("run", 9) };
    const inflight = new Map<string, AbortController>();
    try {
      await this.control.openRun({ scope, catalog: { case: "catalogId", value: this.catalogId }, ...this.openRunFields() });
      const stream = this.sandbox.exec({ scope, execCallId: newId("call", 8), inputJson: JSON.stringify(args ?? {}) }, { signal });
      for await (const ev of stream) {
        if (ev.event.case === "toolCall") {
          const c = ev.event.value;
          const ctl = new AbortController();
          inflight.set(c.callId, ctl);
          void this.answer(scope, c.callId, c.sourceName, c.toolName, c.inputJson, ctl.signal).finally(() => inflight.delete(c.callId));
        } else if (ev.event.case === "result") {
          return JSON.parse(ev.event.value.modelJson) as Record<string, unknown>;
        }
      }
      return errorResponse("INTERNAL_ERROR", "the sandbox ended the run without a result.", "Retry the run.");
    } catch (err) {
      if (signal.aborted) return errorResponse("INTERNAL_ERROR", "the run was cancelled by the client.", "Run it again if it is still needed.");
      this.log.warn({ err: (err as Error).message }, "codemode.run failed in the service");
      return errorResponse("RUNTIME_UNAVAILABLE", `codemode.run could not run the script: ${(err as Error).message}`, "Retry the run.");
    } finally {
      // Calls the script no longer awaits (it ended, failed, timed out): cancel them upstream.
      for (const ctl of inflight.values()) ctl.abort();
      void this.control.closeRun({ scope }).catch(() => undefined);
    }
  }

  /** Runs one nested call on its upstream server and answers the sidecar. */
  private async answer(
    scope: { agentId: string; sessionId: string; sessionKey: string; agentRunId: string },
    callId: string,
    catalogName: string,
    toolName: string,
    inputJson: string,
    signal: AbortSignal,
  ): Promise<void> {
    const m = this.members.find((x) => x.catalogName === catalogName);
    let outcome: { case: "resultJson"; value: string } | { case: "error"; value: { name: string; message: string } };
    try {
      if (!m) throw new UpstreamCallError("ServerNotFoundError", `no configured MCP server is named ${catalogName}`);
      // The catalog may carry the tool's name escaped (names catalog ids cannot hold); the upstream gets its own.
      const result = await m.upstream.callTool(canonicalToolName(toolName), JSON.parse(inputJson) as unknown, signal, this.limits.timeoutMs + 5_000);
      outcome = { case: "resultJson", value: JSON.stringify(result) };
    } catch (err) {
      const e = err instanceof UpstreamCallError ? err : new UpstreamCallError("ToolCallError", (err as Error)?.message ?? String(err));
      outcome = { case: "error", value: { name: e.name, message: e.message.slice(0, 4_000) } };
    }
    if (signal.aborted) return;
    try {
      await this.sandbox.bridgeCallback({ scope, callId, outcome });
    } catch (err) {
      this.log.debug({ callId, err: (err as Error).message }, "a tool answer was not delivered (the run ended)");
    }
  }
}

export { RUN_TOOL_NAME };

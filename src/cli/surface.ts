/**
 * `codemode surface`: what the model sees. Opens a run for its own scope with the tools
 * of a `--tools` module (or none) on the chosen surface, prints the model-visible tool
 * definitions exactly as DescribeSurface serializes them with their byte size, and
 * closes the run. Comparing `--mode direct` with the Tool Search and code-mode surfaces
 * shows what each costs in every model request.
 */
import { parseArgs } from "node:util";
import { SurfaceKind } from "../gen/codemode/common/v1/common_pb.js";
import { Control } from "../gen/codemode/orchestrator/v1/control_pb.js";
import { createClient } from "../protocol/grpc-client.js";
import type { LocalClient } from "../protocol/local-client.js";
import { parseHostPort } from "../shared/address.js";
import { newId } from "../shared/ids.js";
import { silentLogger } from "../shared/logger.js";
import { toWireMcpServer, toWireTool } from "../shared/tool-wire.js";
import { UsageError } from "./exec.js";
import { clientSecurity, clientSecurityFlags, SECURITY_USAGE } from "./security-flags.js";
import { loadToolsModule, type ToolsModule } from "./tools-module.js";

const USAGE = `usage: codemode surface --mode code|tool_search_code|tool_search|direct [--tools FILE.mjs]
                        [--allow PATTERN]... [--deny PATTERN]...
                        [--orchestrator HOST:PORT ${SECURITY_USAGE.client}]

Prints the model-visible tool definitions of a run with the --tools module's tools (none
without it) on the chosen surface, as JSON with their serialized bytes.
Without --orchestrator, the surface is computed in this process by the Control service
\`codemode start\` runs, over fresh in-memory state: no service needs to be running.
With --orchestrator HOST:PORT, that orchestrator's Control port answers instead, so the
namespaces registered there and its sidecars' health count too; the TLS and token flags
apply to that connection only.`;

export const SURFACE_MODES = ["code", "tool_search_code", "tool_search", "direct"] as const;
export type SurfaceMode = (typeof SURFACE_MODES)[number];

/** The OpenRun config and tool_search fields that select a surface. */
export function surfaceSelection(mode: SurfaceMode): { config: { enabled?: boolean }; toolSearch?: { enabled: boolean; mode: string } } {
  switch (mode) {
    case "code":
      return { config: {} };
    case "tool_search_code":
      return { config: {}, toolSearch: { enabled: true, mode: "code" } };
    case "tool_search":
      return { config: {}, toolSearch: { enabled: true, mode: "tools" } };
    case "direct":
      return { config: { enabled: false } };
  }
}

const KIND_NAMES: Record<number, string> = {
  [SurfaceKind.CODE_MODE]: "code_mode",
  [SurfaceKind.TOOL_SEARCH_CODE]: "tool_search_code",
  [SurfaceKind.TOOL_SEARCH_TOOLS]: "tool_search",
  [SurfaceKind.DIRECT]: "direct",
  [SurfaceKind.NONE]: "none",
};

export async function runSurface(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      options: {
        mode: { type: "string" },
        tools: { type: "string" },
        orchestrator: { type: "string" },
        allow: { type: "string", multiple: true },
        deny: { type: "string", multiple: true },
        help: { type: "boolean", short: "h" },
        ...clientSecurityFlags,
      },
      strict: true,
    });
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\n${USAGE}`);
  }
  const { values } = parsed;
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const mode = values.mode as SurfaceMode | undefined;
  if (!mode || !SURFACE_MODES.includes(mode)) throw new UsageError(`--mode must be one of ${SURFACE_MODES.join(", ")}\n${USAGE}`);
  if (values.orchestrator !== undefined) parseHostPort(values.orchestrator, "--orchestrator");
  else {
    const remoteOnly = Object.keys(clientSecurityFlags).filter((flag) => (values as Record<string, unknown>)[flag] !== undefined);
    if (remoteOnly.length > 0) throw new UsageError(`the connection flags (${remoteOnly.map((f) => `--${f}`).join(", ")}) need --orchestrator\n${USAGE}`);
  }
  const module: ToolsModule = values.tools ? await loadToolsModule(values.tools) : { tools: [], mcpServers: [], namespaces: [] };
  const scope = { agentId: "cli", sessionId: newId("sess", 8), sessionKey: "cli", agentRunId: newId("run", 8) };
  const selection = surfaceSelection(mode);
  const { control, close } = await controlFor(values.orchestrator, values);
  try {
    for (const ns of module.namespaces) await control.registerNamespace({ namespace: ns });
    const opened = await control.openRun({
      scope,
      catalog: { case: "tools", value: { tools: module.tools.map(toWireTool), mcpServers: module.mcpServers.map(toWireMcpServer) } },
      policy: { allow: values.allow ?? [], deny: values.deny ?? [], allowNone: false },
      config: selection.config,
      ...(selection.toolSearch ? { toolSearch: selection.toolSearch } : {}),
    });
    await control.closeRun({ scope });
    const s = opened.surface!;
    const out = {
      mode,
      surface: KIND_NAMES[s.kind] ?? "unspecified",
      serializedBytes: s.serializedBytes,
      catalogSize: s.catalogSize,
      sources: { openclaw: s.sources?.openclaw ?? 0, mcp: s.sources?.mcp ?? 0, client: s.sources?.client ?? 0 },
      ...(s.inactiveReason ? { note: s.inactiveReason } : {}),
      tools: JSON.parse(s.toolsJson) as unknown,
    };
    process.stdout.write(`${JSON.stringify(out, null, 2)}\n`);
    return 0;
  } finally {
    await close();
  }
}

/** The Control calls this command makes. */
type SurfaceControl = Pick<LocalClient<typeof Control.method>, "registerNamespace" | "openRun" | "closeRun">;

/** A running orchestrator's Control port, or (no address) the same Control service started in this process. */
async function controlFor(
  address: string | undefined,
  values: Parameters<typeof clientSecurity>[0],
): Promise<{ control: SurfaceControl; close(): Promise<void> }> {
  if (address !== undefined) {
    const remote = createClient(Control, address, {}, clientSecurity(values));
    return { control: remote, close: async () => remote.close() };
  }
  // Loaded only here: a remote surface does not load the orchestrator's modules.
  const { startInProcessControl } = await import("../orchestrator/in-process-control.js");
  return startInProcessControl(silentLogger());
}

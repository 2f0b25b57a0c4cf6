/**
 * Tools between their wire form and the forms code uses: a gateway-side definition
 * turned into the wire `Tool` (CLI gateway and tests share it), and MCP annotations and
 * a tool's allowed callers read back from the wire (orchestrator and sidecar share it).
 */
import type { MessageInitShape } from "@bufbuild/protobuf";
import { ToolCallers, ToolOrigin, ToolSource, type McpServerSchema, type ToolAnnotations, type ToolSchema } from "../gen/codemode/common/v1/common_pb.js";

/** A gateway's allowed callers of a tool: the model directly, programs, or both (the default). */
export type AllowedCallers = "model" | "program" | "both";
/** The rule as a catalog entry holds it: absent means both. */
export type CallerRule = "model" | "program";

const CALLERS_TO_WIRE = { both: ToolCallers.MODEL_AND_PROGRAM, model: ToolCallers.MODEL, program: ToolCallers.PROGRAM } as const;

/** The wire's ToolCallers as an entry holds it; undefined for both, null for a value this build does not know. */
export function callerRuleFromWire(v: ToolCallers): CallerRule | undefined | null {
  if (v === ToolCallers.UNSPECIFIED || v === ToolCallers.MODEL_AND_PROGRAM) return undefined;
  if (v === ToolCallers.MODEL) return "model";
  if (v === ToolCallers.PROGRAM) return "program";
  return null;
}

export function callerRuleToWire(rule: CallerRule | undefined): ToolCallers {
  return rule ? CALLERS_TO_WIRE[rule] : ToolCallers.UNSPECIFIED;
}

/** Whether programs may call the entry (code mode, tool_search_code, codemode.run). */
export function callableFromCode(e: { allowedCallers?: CallerRule | undefined }): boolean {
  return e.allowedCallers !== "model";
}

/** Whether the model may call the entry directly (direct definitions, the Tool Search structured tools). */
export function callableByModel(e: { allowedCallers?: CallerRule | undefined }): boolean {
  return e.allowedCallers !== "program";
}

/** What a program is told when it calls a direct-only tool (the guest gets it as a catchable Error). */
export function modelOnlyMessage(name: string): string {
  return `tool ${JSON.stringify(name)} can only be called by the model directly, not from code (its allowedCallers is "model").`;
}

/** MCP tool annotations with only the hints that were set. */
export type Annotations = { title?: string; readOnlyHint?: boolean; destructiveHint?: boolean; idempotentHint?: boolean; openWorldHint?: boolean };

export function annotationsFromWire(a: ToolAnnotations | undefined): Annotations {
  const out: Annotations = {};
  if (!a) return out;
  if (a.title !== undefined) out.title = a.title.slice(0, 256);
  if (a.readOnlyHint !== undefined) out.readOnlyHint = a.readOnlyHint;
  if (a.destructiveHint !== undefined) out.destructiveHint = a.destructiveHint;
  if (a.idempotentHint !== undefined) out.idempotentHint = a.idempotentHint;
  if (a.openWorldHint !== undefined) out.openWorldHint = a.openWorldHint;
  return out;
}

export type GatewayTool = {
  name: string;
  label?: string | undefined;
  description?: string | undefined;
  parameters?: Record<string, unknown> | undefined;
  source?: "openclaw" | "mcp" | "client" | undefined;
  owner?: string | undefined;
  origin?: "core" | "bundled_plugin" | "external_plugin" | undefined;
  outputSchema?: Record<string, unknown> | undefined;
  annotations?: { [K in keyof Annotations]?: Annotations[K] | undefined } | undefined;
  examples?: unknown[] | undefined;
  keywords?: string[] | undefined;
  /** Who may call the tool (default "both"). */
  allowedCallers?: AllowedCallers | undefined;
};

/** A gateway-side MCP server description (see McpServer in common.proto). */
export type GatewayMcpServer = {
  name: string;
  serverId?: string | undefined;
  title?: string | undefined;
  version?: string | undefined;
  description?: string | undefined;
  instructions?: string | undefined;
  resources?: boolean | undefined;
  prompts?: boolean | undefined;
  aliases?: string[] | undefined;
};

export function toWireMcpServer(s: GatewayMcpServer): MessageInitShape<typeof McpServerSchema> {
  return {
    name: s.name,
    serverId: s.serverId ?? "",
    title: s.title ?? "",
    version: s.version ?? "",
    description: s.description ?? "",
    instructions: s.instructions ?? "",
    resources: s.resources ?? false,
    prompts: s.prompts ?? false,
    aliases: s.aliases ?? [],
  };
}

const SOURCE = { openclaw: ToolSource.OPENCLAW, mcp: ToolSource.MCP, client: ToolSource.CLIENT } as const;
const ORIGIN = { core: ToolOrigin.CORE, bundled_plugin: ToolOrigin.BUNDLED_PLUGIN, external_plugin: ToolOrigin.EXTERNAL_PLUGIN } as const;

export function toWireTool(t: GatewayTool): MessageInitShape<typeof ToolSchema> {
  return {
    name: t.name,
    label: t.label ?? "",
    description: t.description ?? `${t.name} tool`,
    parametersJson: JSON.stringify(t.parameters ?? { type: "object" }),
    source: SOURCE[t.source ?? "openclaw"],
    sourceName: t.owner ?? "",
    origin: t.origin ? ORIGIN[t.origin] : ToolOrigin.UNSPECIFIED,
    outputSchemaJson: t.outputSchema ? JSON.stringify(t.outputSchema) : "",
    ...(t.annotations ? { annotations: t.annotations } : {}),
    examplesJson: (t.examples ?? []).map((e) => JSON.stringify(e)),
    keywords: t.keywords ?? [],
    ...(t.allowedCallers ? { allowedCallers: CALLERS_TO_WIRE[t.allowedCallers] } : {}),
  };
}

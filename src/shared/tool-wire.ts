/** A gateway-side tool definition turned into the wire `Tool` (CLI gateway and tests share it). */
import type { MessageInitShape } from "@bufbuild/protobuf";
import { ToolOrigin, ToolSource, type ToolSchema } from "../gen/codemode/common/v1/common_pb.js";

export type GatewayTool = {
  name: string;
  label?: string | undefined;
  description?: string | undefined;
  parameters?: Record<string, unknown> | undefined;
  source?: "openclaw" | "mcp" | "client" | undefined;
  owner?: string | undefined;
  origin?: "core" | "bundled_plugin" | "external_plugin" | undefined;
};

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
  };
}

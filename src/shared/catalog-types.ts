/**
 * The shapes of a run's catalog that both processes hold: a policy-visible entry with its
 * MCP metadata (the orchestrator's view, the sidecar's run catalog) and an MCP server's
 * metadata. One definition, so the two ends of ResolveRun cannot drift apart.
 */
import type { Annotations, CallerRule } from "./tool-wire.js";

export type { Annotations, CallerRule };

export type CatalogEntryData = {
  id: string;
  name: string;
  label: string;
  description: string;
  source: "openclaw" | "mcp" | "client";
  sourceName: string;
  parametersJson: string;
  /** "" when the tool declares none. */
  outputSchemaJson: string;
  annotations: Annotations;
  examplesJson: string[];
  keywords: string[];
  /** Who may call the tool; absent for both (the model directly and programs), as a tool without the rule. */
  allowedCallers?: CallerRule;
};

/** What a gateway knows about one MCP server (see McpServer in common.proto). */
export type McpServerData = {
  name: string;
  serverId: string;
  title: string;
  version: string;
  description: string;
  instructions: string;
  resources: boolean;
  prompts: boolean;
  aliases: string[];
};

/**
 * The shapes of a run's catalog as the sidecar receives it from the orchestrator
 * (ResolveRun): entries with their MCP metadata, MCP servers, visible namespaces.
 */
import type { Annotations } from "../../shared/tool-wire.js";

export type { Annotations };

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
};

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

export type NamespaceData = { id: string; pluginId: string; globalName: string; scopeJson: string };

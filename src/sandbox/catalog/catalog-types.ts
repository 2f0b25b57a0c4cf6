/**
 * The shapes of a run's catalog as the sidecar receives it from the orchestrator
 * (ResolveRun): entries and MCP servers (shared with the orchestrator), and the visible
 * namespaces.
 */
export type { Annotations, CatalogEntryData, McpServerData } from "../../shared/catalog-types.js";

export type NamespaceData = { id: string; pluginId: string; globalName: string; scopeJson: string };

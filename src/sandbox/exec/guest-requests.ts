/**
 * What a segment makes of a guest's host requests before anything leaves the sidecar: the
 * catalog entry a nested call names (and the caller rule that may refuse it), a request's
 * payload read defensively, and the answers to catalog requests (search, describe, the
 * MCP API files), given from the run's catalog without the gateway.
 */
import type { CodeModeConfig } from "../../shared/config.js";
import type { AnswerValue } from "../../shared/link-wire.js";
import type { CatalogEntryData, CatalogSurface, RunCatalog } from "../catalog/run-catalog.js";
import type { NestedCallMessage } from "../pool/task-protocol.js";

/** Longest search query (characters) the catalog ranks; longer queries are cut. */
const MAX_QUERY_CHARS = 256;

export type RequestPayload = { query: string; limit: number | null; id: string; path: string; prefix: string; server: string; tool: string; schema: boolean };

const NO_CATALOG = { ok: false as const, name: "ToolNotFound", message: "this run has no tool catalog." };

/**
 * The catalog entry and input of a nested call, however the guest made it. On the Tool
 * Search surface (`tool_search_code`) a `tools` call reaches MCP entries by id too. A
 * tool only the model may call (allowedCallers "model") is refused here, whatever path or
 * guessed id the program used: no nested call reaches the gateway.
 */
export function resolveCall(
  catalog: RunCatalog | undefined,
  m: NestedCallMessage,
  surface: CatalogSurface,
): { ok: true; entry: CatalogEntryData; inputJson: string } | { ok: false; name: string; message: string } {
  if (!catalog) return { ok: false, name: "ToolNotFound", message: `unknown tool id ${JSON.stringify(m.target.slice(0, 200))}. This run has no tool catalog.` };
  if (m.via === "ns") {
    const n = catalog.namespaces.resolveCall(m.target, m.path, m.inputJson);
    return n.ok ? (catalog.refuseFromCode(n.entry.id) ?? n) : n;
  }
  const refused = catalog.refuseFromCode(m.target);
  if (refused) return refused;
  const r = m.via === "mcp" ? catalog.mcp.resolve(m.target) : catalog.resolve(m.target, surface);
  return r.ok ? { ok: true, entry: r.entry, inputJson: m.inputJson } : r;
}

/** A guest request payload, read defensively: guest code can make it any JSON value. */
export function requestPayload(json: string): RequestPayload {
  let raw: unknown;
  try {
    raw = JSON.parse(json);
  } catch {
    raw = null;
  }
  const o = raw !== null && typeof raw === "object" && !Array.isArray(raw) ? (raw as Record<string, unknown>) : {};
  const str = (v: unknown) => (typeof v === "string" ? v : "");
  return {
    query: str(o.query),
    limit: typeof o.limit === "number" ? o.limit : null,
    id: str(o.id),
    path: str(o.path),
    prefix: str(o.prefix),
    server: str(o.server),
    tool: str(o.tool),
    schema: o.schema === true,
  };
}

/** The answer to a catalog request (`search`, `describe`, `api_list`, `api_read`, `mcp_api`) from the run's catalog. */
export function answerCatalogRequest(
  catalog: RunCatalog | undefined,
  op: string,
  payload: RequestPayload,
  config: CodeModeConfig,
  surface: CatalogSurface,
): AnswerValue {
  if (op === "search") {
    const requested = typeof payload.limit === "number" && Number.isFinite(payload.limit) ? Math.trunc(payload.limit) : config.searchDefaultLimit;
    const limit = Math.min(config.maxSearchLimit, Math.max(1, requested));
    return { ok: true, json: JSON.stringify(catalog ? catalog.search(payload.query.slice(0, MAX_QUERY_CHARS), limit, surface) : []) };
  }
  if (op === "describe") {
    const d = catalog ? catalog.describe(payload.id, surface) : NO_CATALOG;
    return d.ok ? { ok: true, json: JSON.stringify(d.value) } : { ok: false, error: { name: d.name, message: d.message } };
  }
  if (op === "api_list") {
    const files = catalog ? catalog.mcp.list(payload.prefix) : [];
    return Array.isArray(files) ? { ok: true, json: JSON.stringify(files) } : { ok: false, error: { name: files.name, message: files.message } };
  }
  if (op === "api_read") {
    const file = catalog ? catalog.mcp.read(payload.path) : NO_CATALOG;
    return file.ok ? { ok: true, json: JSON.stringify(file.text) } : { ok: false, error: { name: file.name, message: file.message } };
  }
  const header = catalog ? catalog.mcp.api(payload.server, payload.tool, payload.schema) : NO_CATALOG;
  return header.ok ? { ok: true, json: JSON.stringify(header.value) } : { ok: false, error: { name: header.name, message: header.message } };
}

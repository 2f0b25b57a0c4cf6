/**
 * A run's internal namespaces on the sidecar: the table the guest prelude installs
 * (namespace id, global name, scope JSON), and the host-side resolution of a guest call
 * (`Issues.update(5, {...})` arrives as namespace id, member path and arguments). The
 * path is looked up in the host's own copy of the scope, never trusted from the guest,
 * so a forged namespace id or path, or a path to plain data, is refused; the marker's
 * tool must be the registering plugin's own visible tool. The call then runs as that
 * catalog tool, with the input mapped from the arguments as the marker declares.
 */
import { PATH_SEPARATOR } from "../../shared/namespace-scope.js";
import type { CatalogEntryData, NamespaceData } from "./catalog-types.js";
import type { Failure } from "./mcp-catalog.js";

type Installed = { data: NamespaceData; scope: unknown };

const MAX_PATH_CHARS = 512;

function shown(text: string): string {
  return JSON.stringify(text.length > 100 ? `${text.slice(0, 100)}…` : text);
}

export class NamespaceCatalog {
  private readonly byId = new Map<string, Installed>();
  private readonly pluginTools = new Map<string, CatalogEntryData>();
  /** [id, globalName, scopeJson], as the prelude reads it. */
  readonly guestTable: Array<[string, string, string]> = [];

  constructor(namespaces: readonly NamespaceData[], entries: readonly CatalogEntryData[]) {
    for (const e of entries) if (e.source === "openclaw") this.pluginTools.set(`${e.sourceName}\0${e.name}`, e);
    for (const ns of namespaces) {
      let scope: unknown;
      try {
        scope = JSON.parse(ns.scopeJson) as unknown;
      } catch {
        continue; // checked at registration; a corrupt record is simply not installed
      }
      this.byId.set(ns.id, { data: ns, scope });
      this.guestTable.push([ns.id, ns.globalName, ns.scopeJson]);
    }
  }

  get size(): number {
    return this.byId.size;
  }

  /** Maps a guest namespace call to its backing catalog tool and input. */
  resolveCall(nsId: string, path: string, argsJson: string): { ok: true; entry: CatalogEntryData; inputJson: string } | Failure {
    const ns = this.byId.get(nsId);
    if (!ns) return { ok: false, name: "TypeError", message: `no namespace ${shown(nsId)} is installed in this run.` };
    const label = `${ns.data.globalName}.${path.slice(0, MAX_PATH_CHARS)}`;
    if (path.length === 0 || path.length > MAX_PATH_CHARS) return { ok: false, name: "TypeError", message: `${shown(label)} is not a callable member.` };
    let node: unknown = ns.scope;
    for (const segment of path.split(PATH_SEPARATOR)) {
      if (node === null || typeof node !== "object" || !Object.hasOwn(node, segment)) {
        return { ok: false, name: "TypeError", message: `${shown(label)} is not a member of namespace ${ns.data.globalName}.` };
      }
      node = (node as Record<string, unknown>)[segment];
    }
    if (node === null || typeof node !== "object" || Array.isArray(node) || typeof (node as { $tool?: unknown }).$tool !== "string") {
      return { ok: false, name: "TypeError", message: `${shown(label)} is not a callable member of namespace ${ns.data.globalName}.` };
    }
    const marker = node as { $tool: string; args?: string[] };
    const entry = this.pluginTools.get(`${ns.data.pluginId}\0${marker.$tool}`);
    if (!entry) return { ok: false, name: "ToolNotFound", message: `${label} is backed by ${marker.$tool}, which this run cannot see.` };
    let args: unknown;
    try {
      args = JSON.parse(argsJson) as unknown;
    } catch {
      args = [];
    }
    const list = Array.isArray(args) ? args : [];
    let input: unknown;
    if (marker.args) {
      const obj: Record<string, unknown> = {};
      marker.args.forEach((name, i) => {
        if (i < list.length) Object.defineProperty(obj, name, { value: list[i], enumerable: true, writable: true, configurable: true });
      });
      input = obj;
    } else {
      input = list.length > 0 && list[0] !== null && list[0] !== undefined ? list[0] : {};
    }
    return { ok: true, entry, inputJson: JSON.stringify(input) };
  }
}

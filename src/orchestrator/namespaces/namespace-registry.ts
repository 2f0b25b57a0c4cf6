/**
 * The registry of internal namespaces, keyed by namespace id and owned per plugin (the
 * seed's registerCodeModeNamespaceForPlugin / clearCodeModeNamespacesForPlugin), and
 * the rule that decides which registrations a run sees: every required tool is in the
 * run's policy-filtered view, as a plugin tool owned by the registering plugin. Two
 * registries share the contract: in memory (below) and Redis
 * (./redis-namespaces.ts). A generation number changes with every change, so
 * resolving a run reads the registry only when it changed.
 */
import { createHash } from "node:crypto";
import { ServiceError } from "../../protocol/service-error.js";
import type { ViewEntry } from "../catalog/catalog-view.js";
import type { CheckedNamespace } from "./namespace-rules.js";

export type NamespaceSnapshot = { generation: string; namespaces: readonly CheckedNamespace[] };

export interface NamespaceRegistry {
  /** Adds or replaces a registration; refuses an id or globalName another plugin holds. */
  register(ns: CheckedNamespace): Promise<{ replaced: boolean }>;
  /** Removes every registration of a plugin; returns how many. */
  clear(pluginId: string): Promise<number>;
  /** Every registration in id order, with the registry's generation. */
  snapshot(): Promise<NamespaceSnapshot>;
}

/** The refusal for a registration that collides with another one (shared by both registries). */
export function collision(existing: readonly CheckedNamespace[], ns: CheckedNamespace): ServiceError | undefined {
  for (const other of existing) {
    if (other.id === ns.id && other.pluginId !== ns.pluginId) {
      return new ServiceError("already_exists", `namespace ${ns.id} is registered by plugin ${other.pluginId}; only that plugin can replace it`);
    }
    if (other.id !== ns.id && other.globalName === ns.globalName) {
      return new ServiceError("already_exists", `globalName ${ns.globalName} is already used by namespace ${other.id} (plugin ${other.pluginId})`);
    }
  }
  return undefined;
}

export class MemoryNamespaceRegistry implements NamespaceRegistry {
  private readonly byId = new Map<string, CheckedNamespace>();
  private generation = 0;
  private cached: NamespaceSnapshot | undefined;

  async register(ns: CheckedNamespace): Promise<{ replaced: boolean }> {
    const refusal = collision([...this.byId.values()], ns);
    if (refusal) throw refusal;
    const replaced = this.byId.has(ns.id);
    this.byId.set(ns.id, Object.freeze({ ...ns, requiredToolNames: [...ns.requiredToolNames] }));
    this.changed();
    return { replaced };
  }

  async clear(pluginId: string): Promise<number> {
    let n = 0;
    for (const [id, ns] of this.byId) {
      if (ns.pluginId === pluginId) {
        this.byId.delete(id);
        n++;
      }
    }
    if (n > 0) this.changed();
    return n;
  }

  async snapshot(): Promise<NamespaceSnapshot> {
    if (!this.cached) {
      const namespaces = [...this.byId.values()].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
      this.cached = { generation: String(this.generation), namespaces };
    }
    return this.cached;
  }

  private changed(): void {
    this.generation++;
    this.cached = undefined;
  }
}

/**
 * The registrations a run with this view may see, in id order. A namespace is called from
 * programs only, so a required tool that only the model may call (allowedCallers "model")
 * counts as missing.
 */
export function visibleNamespaces(all: readonly CheckedNamespace[], view: readonly ViewEntry[]): CheckedNamespace[] {
  if (all.length === 0) return [];
  const owned = new Set<string>();
  for (const e of view) if (e.source === "openclaw" && e.allowedCallers !== "model") owned.add(`${e.sourceName}\0${e.name}`);
  return all.filter((ns) => ns.requiredToolNames.every((name) => owned.has(`${ns.pluginId}\0${name}`)));
}

/** A digest of what a run sees of the registry: part of its catalog view's version. */
export function namespacesDigest(visible: readonly CheckedNamespace[]): string {
  if (visible.length === 0) return "";
  const h = createHash("sha256");
  for (const ns of visible) h.update(JSON.stringify([ns.id, ns.pluginId, ns.globalName, ns.scopeJson, ns.description, ns.prompt])).update("\n");
  return h.digest("hex").slice(0, 16);
}

/**
 * Which namespaces a run sees, and the version of the run's whole view (catalog, policy,
 * id source, visible namespaces) that sidecars cache their catalog tables by. Computed
 * per resolve because registrations change independently of runs; cached by registry
 * generation and view version, so an unchanged registry costs nothing per exec.
 */
import type { RunSpec } from "../runs/runs.js";
import type { CheckedNamespace } from "./namespace-rules.js";
import { namespacesDigest, visibleNamespaces, type NamespaceRegistry } from "./namespace-registry.js";

export type RunNamespaceView = { visible: readonly CheckedNamespace[]; version: string };

const MAX_CACHED = 512;

export class RunNamespaces {
  private readonly cache = new Map<string, RunNamespaceView>();

  constructor(readonly registry: NamespaceRegistry) {}

  async forRun(run: RunSpec): Promise<RunNamespaceView> {
    const snap = await this.registry.snapshot();
    const key = `${snap.generation}\n${run.viewVersion}`;
    let view = this.cache.get(key);
    if (!view) {
      const visible = visibleNamespaces(snap.namespaces, run.view);
      const digest = namespacesDigest(visible);
      view = { visible, version: digest ? `${run.viewVersion}.${digest}` : run.viewVersion };
      this.cache.set(key, view);
      if (this.cache.size > MAX_CACHED) this.cache.delete(this.cache.keys().next().value!);
    }
    return view;
  }
}

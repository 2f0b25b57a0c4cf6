/**
 * The code-mode runs each attached sidecar is running whose gateway knows their id (their
 * program made a nested call there: `RunLive` on the link), until the segment's record says
 * how it ended. When a sidecar is gone for good (./claim-release.ts), the runs it still ran
 * are handed to the store as vanished, so a `wait` for one is told the run was lost, not
 * that it is unknown (docs/contract.md#crash-safe-parking). Only this orchestrator's own links are seen.
 */
import type { Logger } from "../../shared/logger.js";
import { tenantOfScope, type Scope } from "../../shared/scope.js";
import { VANISHED_MEMORY_MS, type RunStore } from "../suspended/run-store.js";
import { storeCall } from "../state/store-failure.js";

/** Runs remembered per sidecar at most (a sidecar runs far fewer at once); the oldest go first. */
const MAX_PER_SIDECAR = 10_000;

export type LiveRun = { codeModeRunId: string; scope: Scope };

export class LiveRuns {
  private readonly bySidecar = new Map<string, Map<string, Scope>>();

  started(sidecarId: string, codeModeRunId: string, scope: Scope): void {
    let runs = this.bySidecar.get(sidecarId);
    if (!runs) this.bySidecar.set(sidecarId, (runs = new Map()));
    runs.set(codeModeRunId, scope);
    if (runs.size > MAX_PER_SIDECAR) runs.delete(runs.keys().next().value!);
  }

  /** A segment of the run ended on the sidecar (completed, failed, or stored as waiting). */
  ended(sidecarId: string, codeModeRunId: string): void {
    const runs = this.bySidecar.get(sidecarId);
    if (!runs?.delete(codeModeRunId) || runs.size > 0) return;
    this.bySidecar.delete(sidecarId);
  }

  /** The runs a gone sidecar still ran, forgotten here. */
  take(sidecarId: string): LiveRun[] {
    const runs = this.bySidecar.get(sidecarId);
    this.bySidecar.delete(sidecarId);
    return runs ? [...runs].map(([codeModeRunId, scope]) => ({ codeModeRunId, scope })) : [];
  }
}

/** Hands a gone sidecar's runs to their tenants' stores as vanished; a store that fails is logged. */
export async function markVanished(runs: readonly LiveRun[], storeOf: (tenant: string) => RunStore, log: Logger): Promise<void> {
  const byTenant = new Map<string, LiveRun[]>();
  for (const r of runs) {
    const t = tenantOfScope(r.scope);
    byTenant.set(t, [...(byTenant.get(t) ?? []), r]);
  }
  for (const [tenant, list] of byTenant) {
    try {
      await storeCall(log, "remember a gone sidecar's runs as lost", () => storeOf(tenant).markVanished(list, VANISHED_MEMORY_MS));
      log.info({ tenant, runs: list.length }, "a gone sidecar was running code mode runs that were never stored: a wait for one is told it was lost");
    } catch (err) {
      log.warn({ err, tenant, runs: list.length }, "could not remember a gone sidecar's runs as lost; a wait for one is told it is unavailable");
    }
  }
}

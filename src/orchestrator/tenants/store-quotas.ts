/**
 * The quotas of a tenant (../../shared/tenants.ts) that hold across every sidecar and every
 * orchestrator replica, because the store enforces them: its suspended runs
 * (`maxSuspendedRuns`, `maxSuspendedBytes`) and its session stores (`maxStoreBytes`). The
 * stores count and refuse (../suspended/, ../sessions/); this module says why, to the
 * gateway and the model, in one form: the tenant, the quota by its name, and when a retry
 * can succeed.
 */
import type { TenantQuotas } from "../../shared/tenants.js";

export type StoreQuota = "maxSuspendedRuns" | "maxSuspendedBytes" | "maxStoreBytes";

/** In every refusal of a store quota (what metrics tell them by). */
export const OVER_QUOTA = "over its quota";

/** A tenant's store quotas, and who to tell of a refusal (metrics). */
export type TenantStoreQuotas = { tenant: string; quotas: TenantQuotas; refused?: (quota: StoreQuota) => void };

/** When a suspension refused for a quota can succeed: once a run ends, at the latest when the next one expires. */
function suspendRetry(nextExpiryMs: number | undefined): string {
  const when = nextExpiryMs === undefined ? "" : `, at the latest in ${Math.max(1, Math.ceil((nextExpiryMs - Date.now()) / 1000))} s when the next one expires`;
  return `retry after one of its suspended runs ends (a wait that settles it, or CloseRun)${when}`;
}

export function suspendedRunsRefusal(q: TenantStoreQuotas, nextExpiryMs: number | undefined): string {
  return `code mode run could not be suspended: it would put tenant ${JSON.stringify(q.tenant)} ${OVER_QUOTA} maxSuspendedRuns (${q.quotas.maxSuspendedRuns} suspended runs); ${suspendRetry(nextExpiryMs)}.`;
}

export function suspendedBytesRefusal(q: TenantStoreQuotas, runBytes: number, nextExpiryMs: number | undefined): string {
  const max = q.quotas.maxSuspendedBytes ?? 0;
  const retry = runBytes > max ? "this run alone is larger, so no retry can store it" : suspendRetry(nextExpiryMs);
  return `code mode run could not be suspended: with it (${runBytes} bytes), tenant ${JSON.stringify(q.tenant)}'s suspended runs would go ${OVER_QUOTA} maxSuspendedBytes (${max} bytes); ${retry}.`;
}

export function storeBytesRefusal(tenant: string, max: number, bytes: number): string {
  return `tenant ${JSON.stringify(tenant)}'s session stores would hold ${bytes} bytes, going ${OVER_QUOTA} maxStoreBytes (${max} bytes); retry once one of its session stores is cleared (ClearSessionStore) or expires`;
}

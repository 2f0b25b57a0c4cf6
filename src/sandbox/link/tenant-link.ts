/**
 * The orchestrator link as one tenant's segments use it. Link calls that name a scope carry
 * the tenant in it (RunScope.tenant); those that name only a run or a session (ReleaseRun,
 * AwaitToolResults, LoadSession, CommitSession) get the tenant added here, so the
 * orchestrator reads and writes that tenant's store, and the code that suspends, resumes
 * and keeps session stores needs to know nothing of tenants. The default tenant's view is
 * the link itself, so a sidecar without a tenants file sends what it always sent.
 */
import { DEFAULT_TENANT } from "../../shared/scope.js";
import type { OrchestratorLink } from "./orchestrator-link.js";

/** The link calls that name no scope, by which the orchestrator would not know the tenant. */
const UNSCOPED = ["releaseRun", "awaitToolResults", "loadSession", "commitSession"] as const;

type AnyCall = (request: object, options?: unknown) => Promise<unknown>;

/** `calls` with the tenant added to each UNSCOPED call's request (a view: everything else is `calls`'). */
function withTenant<T extends object>(calls: T, tenant: string): T {
  const view = Object.create(calls) as Record<string, AnyCall>;
  for (const name of UNSCOPED) {
    const call = (calls as Record<string, AnyCall | undefined>)[name];
    if (call) view[name] = (request, options) => call.call(calls, { ...request, tenant }, options);
  }
  return view as T;
}

export class TenantLinks {
  private readonly views = new Map<string, OrchestratorLink>();

  constructor(private readonly link: OrchestratorLink) {}

  /** The link as `tenant`'s segments use it; the same object for every call of one tenant. */
  of(tenant: string): OrchestratorLink {
    if (tenant === DEFAULT_TENANT) return this.link;
    let view = this.views.get(tenant);
    if (!view) {
      // Reads (state, sidecar id, pool health, listeners) go through to the link itself.
      view = Object.create(this.link) as OrchestratorLink;
      Object.defineProperties(view, {
        rpc: { value: withTenant(this.link.rpc, tenant) },
        client: { value: withTenant(this.link.client, tenant) },
      });
      this.views.set(tenant, view);
    }
    return view;
  }
}

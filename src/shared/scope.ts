/**
 * The scope a code-mode run belongs to (its tenant, agent, session, session key, gateway
 * run id), and the one string key both processes index it by. Sidecar and orchestrator must
 * agree on this key: seals, call ownership and stored runs are all checked against it. The
 * tenant comes from the caller's bearer token (./tenants.ts), never from a gateway's scope;
 * on the link it travels in RunScope.tenant. The default tenant is absent from a scope and
 * its key, so a process without a tenants file keys everything as one that knows no tenants.
 */
import type { RunScope } from "../gen/codemode/common/v1/common_pb.js";
import { ServiceError } from "../protocol/service-error.js";
import { checkIdLength } from "./request-limits.js";

/** `tenant` is present only for a tenant other than DEFAULT_TENANT (withTenant). */
export type Scope = { agentId: string; sessionId: string; sessionKey: string; agentRunId: string; tenant?: string };

/** The tenant of every run when no tenants file is given (docs/design-wave-3.md#tenant-first-in-every-key). */
export const DEFAULT_TENANT = "default";

/** What a call on a scope with no open run is told (DescribeSurface, Exec, Wait). */
export const NO_OPEN_RUN = "no run is open for this scope; call OpenRun first";

export function scopeKeyOf(s: Scope): string {
  return s.tenant === undefined || s.tenant === DEFAULT_TENANT
    ? JSON.stringify([s.agentId, s.sessionId, s.sessionKey, s.agentRunId])
    : JSON.stringify([s.agentId, s.sessionId, s.sessionKey, s.agentRunId, s.tenant]);
}

/** The tenant a scope belongs to. */
export function tenantOfScope(s: { tenant?: string }): string {
  return s.tenant || DEFAULT_TENANT;
}

/** The tenant of a scope key (scopeKeyOf's); read only when two keys differ, so it may parse. */
export function tenantOfScopeKey(key: string): string {
  try {
    const parts = JSON.parse(key) as unknown[];
    return typeof parts[4] === "string" ? parts[4] : DEFAULT_TENANT;
  } catch {
    return DEFAULT_TENANT;
  }
}

/** `scope` as `tenant`'s: the default tenant is left out, every other one is named. */
export function withTenant(scope: Scope, tenant: string): Scope {
  if (tenant === DEFAULT_TENANT) {
    if (scope.tenant === undefined) return scope;
    const { tenant: _t, ...rest } = scope;
    return rest;
  }
  return scope.tenant === tenant ? scope : { ...scope, tenant };
}

/** Same tenant, agent, session and session key (the gateway run id may still differ). */
export function sameSession(a: Scope, b: Scope): boolean {
  return a.agentId === b.agentId && a.sessionId === b.sessionId && a.sessionKey === b.sessionKey && tenantOfScope(a) === tenantOfScope(b);
}

/**
 * The scope a gateway's request names; every service call must name its gateway run, within
 * the id limits. A tenant the request names is ignored: the caller's is its token's.
 */
export function requireScope(s: RunScope | undefined): Scope {
  if (!s?.agentRunId.trim()) throw new ServiceError("invalid_argument", "scope.agent_run_id is required");
  checkIdLength("agent_id", s.agentId, "scope.agent_id");
  checkIdLength("session_id", s.sessionId, "scope.session_id");
  checkIdLength("session_key", s.sessionKey, "scope.session_key");
  checkIdLength("agent_run_id", s.agentRunId, "scope.agent_run_id");
  return { agentId: s.agentId, sessionId: s.sessionId, sessionKey: s.sessionKey, agentRunId: s.agentRunId };
}

/** The scope a SidecarLink message names, with its tenant (RunScope.tenant; empty: the default tenant). */
export function scopeFromLink(s: RunScope | undefined): Scope {
  return withTenant(requireScope(s), s?.tenant || DEFAULT_TENANT);
}

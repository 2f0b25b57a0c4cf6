/**
 * The scope a code-mode run belongs to (agent, session, session key, gateway run id),
 * and the one string key both processes index it by. Sidecar and orchestrator must
 * agree on this key: seals, call ownership and stored runs are all checked against it.
 */
import type { RunScope } from "../gen/codemode/common/v1/common_pb.js";
import { ServiceError } from "../protocol/service-error.js";
import { checkIdLength } from "./request-limits.js";

export type Scope = { agentId: string; sessionId: string; sessionKey: string; agentRunId: string };

/** What a call on a scope with no open run is told (DescribeSurface, Exec, Wait). */
export const NO_OPEN_RUN = "no run is open for this scope; call OpenRun first";

export function scopeKeyOf(s: Scope): string {
  return JSON.stringify([s.agentId, s.sessionId, s.sessionKey, s.agentRunId]);
}

/** Same agent, session and session key (the gateway run id may still differ). */
export function sameSession(a: Scope, b: Scope): boolean {
  return a.agentId === b.agentId && a.sessionId === b.sessionId && a.sessionKey === b.sessionKey;
}

/** The scope a request names; every service call must name its gateway run, within the id limits. */
export function requireScope(s: RunScope | undefined): Scope {
  if (!s?.agentRunId.trim()) throw new ServiceError("invalid_argument", "scope.agent_run_id is required");
  checkIdLength("agent_id", s.agentId, "scope.agent_id");
  checkIdLength("session_id", s.sessionId, "scope.session_id");
  checkIdLength("session_key", s.sessionKey, "scope.session_key");
  checkIdLength("agent_run_id", s.agentRunId, "scope.agent_run_id");
  return { agentId: s.agentId, sessionId: s.sessionId, sessionKey: s.sessionKey, agentRunId: s.agentRunId };
}

/**
 * The scope a code-mode run belongs to (agent, session, session key, gateway run id),
 * and the one string key both processes index it by. Sidecar and orchestrator must
 * agree on this key: seals, call ownership and stored runs are all checked against it.
 */
export type Scope = { agentId: string; sessionId: string; sessionKey: string; runId: string };

export function scopeKeyOf(s: Scope): string {
  return JSON.stringify([s.agentId, s.sessionId, s.sessionKey, s.runId]);
}

/** Same agent, session and session key (the gateway run id may still differ). */
export function sameSession(a: Scope, b: Scope): boolean {
  return a.agentId === b.agentId && a.sessionId === b.sessionId && a.sessionKey === b.sessionKey;
}

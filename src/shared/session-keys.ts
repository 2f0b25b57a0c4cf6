/**
 * What the session store (code mode's `store` / `load`) accepts as a key, checked the same
 * way by the sidecar that takes a guest's call and the orchestrator that commits it: 1 to
 * MAX_SESSION_KEY_CHARS printable characters (no control characters, no lone surrogates).
 * A session is named by the run scope's agent id and session key, under its tenant.
 */
import { DEFAULT_TENANT } from "./scope.js";

export { DEFAULT_TENANT };

export const MAX_SESSION_KEY_CHARS = 128;

/** Why `key` is not a session-store key, or undefined when it is one. */
export function sessionKeyProblem(key: string): string | undefined {
  const chars = [...key].length;
  if (chars === 0 || chars > MAX_SESSION_KEY_CHARS) return `a key must be 1 to ${MAX_SESSION_KEY_CHARS} characters, got ${chars}`;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
  if (/[\u0000-\u001f\u007f-\u009f]/.test(key)) return "a key must be printable (it holds a control character)";
  if (!key.isWellFormed()) return "a key must be printable (it holds a lone surrogate)";
  return undefined;
}

/** A session's name in a store: its tenant, agent id and session key. */
export function sessionName(agentId: string, sessionKey: string, tenant = DEFAULT_TENANT): string {
  return `${tenant}:${JSON.stringify([agentId, sessionKey])}`;
}

/**
 * The session store's methods: LoadSession and CommitSession on SidecarLink (a segment reads
 * its session once and commits its writes at its end), GetSessionStore and
 * ClearSessionStore on Control (a gateway reads a session's store, or forgets it). The
 * orchestrator checks what it enforces itself (keys, value sizes, the session's limits)
 * rather than trust a sidecar's arithmetic.
 */
import type { Control } from "../../gen/codemode/orchestrator/v1/control_pb.js";
import type { SidecarLink } from "../../gen/codemode/orchestrator/v1/link_pb.js";
import type { ServiceHandlers } from "../../protocol/grpc-service.js";
import { ServiceError } from "../../protocol/service-error.js";
import { LIMITS } from "../../shared/limits.js";
import type { Logger } from "../../shared/logger.js";
import { checkIdLength } from "../../shared/request-limits.js";
import { DEFAULT_TENANT, sessionKeyProblem, sessionName } from "../../shared/session-keys.js";
import type { SessionStore } from "./session-store.js";

/** The session a request names: its agent id and session key, both required, under `tenant`. */
function sessionOf(req: { agentId: string; sessionKey: string }, tenant: string): string {
  if (!req.agentId || !req.sessionKey) throw new ServiceError("invalid_argument", "agent_id and session_key are required");
  checkIdLength("agent_id", req.agentId);
  checkIdLength("session_key", req.sessionKey);
  return sessionName(req.agentId, req.sessionKey, tenant);
}

const clamp = (n: number, limit: { min: number; max: number }) => Math.min(limit.max, Math.max(limit.min, Math.trunc(n)));

/** One tenant's (the default tenant's when absent): the store is that tenant's. */
export function sessionLinkHandlers(
  store: SessionStore,
  log: Logger,
  tenant = DEFAULT_TENANT,
): Pick<ServiceHandlers<typeof SidecarLink.method>, "loadSession" | "commitSession"> {
  return {
    async loadSession(req) {
      const entries = await store.load(sessionOf(req, tenant));
      return { entries: entries.map((e) => ({ key: e.key, valueJson: e.json })) };
    },
    async commitSession(req) {
      const session = sessionOf(req, tenant);
      const seen = new Set<string>();
      for (const w of req.writes) {
        const problem = sessionKeyProblem(w.key);
        if (problem) throw new ServiceError("invalid_argument", `writes: ${problem}`);
        if (seen.has(w.key)) throw new ServiceError("invalid_argument", `writes: key ${JSON.stringify(w.key)} is written twice`);
        seen.add(w.key);
        if (Buffer.byteLength(w.valueJson, "utf8") > LIMITS.maxSessionValueBytes.max)
          throw new ServiceError("invalid_argument", `writes: the value of ${JSON.stringify(w.key)} is over ${LIMITS.maxSessionValueBytes.max} bytes`);
      }
      const res = await store.commit(
        session,
        req.writes.map((w) => ({ key: w.key, json: w.valueJson })),
        {
          maxKeys: clamp(req.maxKeys || LIMITS.maxSessionKeys.default, LIMITS.maxSessionKeys),
          maxBytes: clamp(Number(req.maxBytes) || LIMITS.maxSessionBytes.default, LIMITS.maxSessionBytes),
          ttlSeconds: clamp(req.ttlSeconds || LIMITS.sessionTtlSeconds.default, LIMITS.sessionTtlSeconds),
        },
      );
      if (!res.ok) log.info({ agentId: req.agentId, refused: res.refused }, "refused a session-store commit");
      return { refused: res.ok ? "" : res.refused, keys: res.keys, bytes: BigInt(res.bytes) };
    },
  };
}

export function sessionControlHandlers(
  store: SessionStore,
  log: Logger,
  tenant = DEFAULT_TENANT,
): Pick<ServiceHandlers<typeof Control.method>, "getSessionStore" | "clearSessionStore"> {
  return {
    async getSessionStore(req) {
      const info = await store.info(sessionOf(req, tenant));
      return { entries: info.entries.map((e) => ({ key: e.key, valueJson: e.json })), bytes: BigInt(info.bytes), expiresAtMs: BigInt(info.expiresAtMs) };
    },
    async clearSessionStore(req) {
      const keysDeleted = await store.clear(sessionOf(req, tenant));
      log.info({ agentId: req.agentId, keysDeleted }, "session store cleared");
      return { keysDeleted };
    },
  };
}

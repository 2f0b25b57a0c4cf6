/**
 * Sends each call to its tenant's handlers. A service's handlers are made once per tenant,
 * over that tenant's stores (./tenant-state.ts), and know nothing of other tenants; these
 * dispatchers pick the set by the caller's tenant: on the Control port the one its bearer
 * token named (the call's context), on the SidecarLink the one the request carries (the
 * scope's `tenant`, or the request's own `tenant` where it has no scope), which the sidecar
 * set from its caller's token. A tenant with no handlers here is refused (./tenant-state.ts
 * `unknownTenant`).
 */
import type { CallContext } from "../../protocol/grpc-service.js";
import { DEFAULT_TENANT } from "../../shared/scope.js";
import { unknownTenant } from "./tenant-state.js";

type AnyHandler = (...args: unknown[]) => Promise<unknown>;

function dispatch<H extends object>(perTenant: ReadonlyMap<string, H>, tenantOf: (args: unknown[]) => string): H {
  const out: Record<string, AnyHandler> = {};
  const names = new Set<string>();
  for (const handlers of perTenant.values()) for (const name of Object.keys(handlers)) names.add(name);
  for (const name of names) {
    out[name] = (...args: unknown[]) => {
      const tenant = tenantOf(args);
      const handler = (perTenant.get(tenant) as Record<string, AnyHandler | undefined> | undefined)?.[name];
      if (!handler) return Promise.reject(unknownTenant(tenant));
      return handler(...args);
    };
  }
  return out as H;
}

/** Handlers that take the call's context last (unary and server-streaming): the tenant its token named. */
export function byCallerTenant<H extends object>(perTenant: ReadonlyMap<string, H>): H {
  return dispatch(perTenant, (args) => (args.at(-1) as CallContext | undefined)?.tenant ?? DEFAULT_TENANT);
}

type LinkRequest = { tenant?: string; scope?: { tenant?: string }; run?: { scope?: { tenant?: string } } } | undefined;

/** The tenant a SidecarLink request names (empty: the default tenant). */
export function linkRequestTenant(req: unknown): string {
  const r = req as LinkRequest;
  return r?.tenant || r?.scope?.tenant || r?.run?.scope?.tenant || DEFAULT_TENANT;
}

/** SidecarLink handlers (request first): the tenant the request names. */
export function byRequestTenant<H extends object>(perTenant: ReadonlyMap<string, H>): H {
  return dispatch(perTenant, (args) => linkRequestTenant(args[0]));
}

/**
 * Transport security in one place: grpc-js server and channel credentials from TLS
 * material (TLS, or mutual TLS when a client CA is given), the bearer token a client
 * sends as `authorization: Bearer <token>` metadata, and the server's checks of it: one
 * port token compared in constant time, or a tenant named by its token's SHA-256 (a
 * tenants file, ../shared/tenants.ts). Nothing configured means plaintext and no token,
 * the default on localhost.
 */
import * as grpc from "@grpc/grpc-js";
import { createHash, timingSafeEqual } from "node:crypto";
import { ServiceError } from "./service-error.js";
import type { Tenants } from "../shared/tenants.js";

/** A server's certificate chain and key (PEM); with `clientCa`, clients must present a certificate it signed (mTLS). */
export type ServerTls = { cert: Buffer; key: Buffer; clientCa?: Buffer };
/** What a client trusts (`ca`; the system roots without it), its own certificate for mTLS, and the name to verify. */
export type ClientTls = { ca?: Buffer; cert?: Buffer; key?: Buffer; serverName?: string };
/** One listening port's security: TLS and the bearer token its calls must carry. */
export type ServerSecurity = { tls?: ServerTls; token?: string };
/** One outgoing connection's security: TLS and the bearer token sent with every call. */
export type ClientSecurity = { tls?: ClientTls; token?: string };

/**
 * Checks a call's metadata; throws a ServiceError (`unauthenticated`) to refuse it. Returns
 * the caller's tenant when the token names one (undefined: the port has no tenants).
 */
export type Authorizer = (metadata: grpc.Metadata) => string | undefined;

export function serverCredentials(tls?: ServerTls): grpc.ServerCredentials {
  if (!tls) return grpc.ServerCredentials.createInsecure();
  return grpc.ServerCredentials.createSsl(tls.clientCa ?? null, [{ cert_chain: tls.cert, private_key: tls.key }], tls.clientCa !== undefined);
}

export function channelCredentials(tls?: ClientTls): grpc.ChannelCredentials {
  if (!tls) return grpc.credentials.createInsecure();
  return grpc.credentials.createSsl(tls.ca ?? null, tls.key ?? null, tls.cert ?? null);
}

/** Adds `authorization: Bearer <token>` to every call's metadata (works on plaintext channels too). */
function bearerInterceptor(token: string): grpc.Interceptor {
  return (options, nextCall) =>
    new grpc.InterceptingCall(nextCall(options), {
      start(metadata, listener, next) {
        metadata.set("authorization", `Bearer ${token}`);
        next(metadata, listener);
      },
    });
}

/** Channel credentials and client options for one connection. */
export function clientConnection(security: ClientSecurity = {}): { credentials: grpc.ChannelCredentials; options: grpc.ClientOptions } {
  const options: grpc.ClientOptions = {};
  const name = security.tls?.serverName;
  if (name) {
    options["grpc.ssl_target_name_override"] = name;
    options["grpc.default_authority"] = name;
  }
  if (security.token !== undefined) options.interceptors = [bearerInterceptor(security.token)];
  return { credentials: channelCredentials(security.tls), options };
}

export { checkToken } from "./token.js";

const digest = (s: string) => createHash("sha256").update(s, "utf8").digest();

/**
 * Refuses a call unless it carries `authorization: Bearer <token>`. The tokens are
 * compared as SHA-256 digests with timingSafeEqual, so the time taken says nothing about
 * the token, its length included. `what` names the credential in the refusal.
 */
export function bearerAuthorizer(token: string, what: string): Authorizer {
  const expected = digest(token);
  return (metadata) => {
    const values = metadata.get("authorization");
    if (values.length === 0) throw new ServiceError("unauthenticated", `this port requires the ${what} as authorization: Bearer <token> metadata`);
    const m = values.length === 1 && typeof values[0] === "string" ? /^Bearer +(\S+) *$/i.exec(values[0]) : null;
    if (!m || !timingSafeEqual(digest(m[1]!), expected)) throw new ServiceError("unauthenticated", `the bearer token is not this port's ${what}`);
    return undefined;
  };
}

/**
 * Admits a call whose bearer token is a tenant's (its SHA-256 is in the tenants file) and
 * names that tenant; a missing or unknown token is refused. The lookup is by the token's
 * digest, so the time taken says nothing of any token.
 */
export function tenantAuthorizer(tenants: Tenants): Authorizer {
  return (metadata) => {
    const values = metadata.get("authorization");
    if (values.length === 0) throw new ServiceError("unauthenticated", "this port requires a tenant's bearer token as authorization: Bearer <token> metadata");
    const m = values.length === 1 && typeof values[0] === "string" ? /^Bearer +(\S+) *$/i.exec(values[0]) : null;
    const tenant = m ? tenants.byTokenDigest(digest(m[1]!).toString("hex")) : undefined;
    if (tenant === undefined) throw new ServiceError("unauthenticated", "the bearer token is no tenant's (its SHA-256 is not in the tenants file)");
    return tenant;
  };
}

/**
 * The CLI's transport-security flags, each with an environment variable of the same name
 * (`--tls-cert` or `CODEMODE_TLS_CERT`; the flag wins, an empty variable counts as unset),
 * read and checked at start into the options of src/protocol/credentials.ts.
 *
 * Listening ports: `--tls-cert FILE --tls-key FILE [--tls-client-ca FILE]` (a client CA
 * means mutual TLS: clients must present a certificate it signed) and `--auth-token-file
 * FILE` or `CODEMODE_AUTH_TOKEN` (a bearer token every Sandbox and Control call must
 * carry). The orchestrator's link port has the same set under `--link-` (`--link-tls-cert`,
 * …, `--link-token-file` or `CODEMODE_LINK_TOKEN`).
 * Outgoing connections: `--tls-ca FILE [--tls-client-cert FILE --tls-client-key FILE]
 * [--tls-server-name NAME]` (exec, surface, health) and the same under `--link-` for a
 * sidecar's link; TLS is on when a CA or a client certificate is given. `--tenants-file`
 * (../shared/tenants.ts) replaces the gateway bearer token: each tenant's is its gateways'.
 */
import { readFileSync } from "node:fs";
import { createSecureContext } from "node:tls";
import type { ClientSecurity, ClientTls, ServerSecurity, ServerTls } from "../protocol/credentials.js";
import { checkToken } from "../protocol/token.js";
import type { Tenants } from "../shared/tenants.js";
import { UsageError } from "./usage-error.js";

type Values = Record<string, string | boolean | string[] | boolean[] | undefined>;

const str = { type: "string" } as const;

/** A listening port: `--tls-cert`, `--tls-key`, `--tls-client-ca`, `--auth-token-file`. */
export const serverSecurityFlags = { "tls-cert": str, "tls-key": str, "tls-client-ca": str, "auth-token-file": str } as const;
/** The orchestrator's link port. */
export const linkServerSecurityFlags = { "link-tls-cert": str, "link-tls-key": str, "link-tls-client-ca": str, "link-token-file": str } as const;
/** A sidecar dialling the link port. */
export const linkClientSecurityFlags = {
  "link-tls-ca": str,
  "link-tls-client-cert": str,
  "link-tls-client-key": str,
  "link-tls-server-name": str,
  "link-token-file": str,
} as const;
/** A client of the Sandbox and Control ports (exec, surface; health takes the TLS ones). */
export const clientTlsFlags = { "tls-ca": str, "tls-client-cert": str, "tls-client-key": str, "tls-server-name": str } as const;
export const clientSecurityFlags = { ...clientTlsFlags, "auth-token-file": str } as const;

/** A process that serves gateways: its tenants. */
export const tenantsFlags = { "tenants-file": str } as const;

/** The usage lines of these flags, for a command's help. */
export const SECURITY_USAGE = {
  server: "[--tls-cert FILE --tls-key FILE [--tls-client-ca FILE]] [--auth-token-file FILE]",
  client: "[--tls-ca FILE] [--tls-client-cert FILE --tls-client-key FILE] [--tls-server-name NAME] [--auth-token-file FILE]",
};

/** `--tls-cert` → CODEMODE_TLS_CERT */
const envName = (flag: string) => `CODEMODE_${flag.toUpperCase().replace(/-/g, "_")}`;

/** The flag's value, else its variable's; with where it came from, for messages. */
function setting(values: Values, flag: string): { value: string; source: string } | undefined {
  const v = values[flag];
  if (typeof v === "string") return { value: v, source: `--${flag}` };
  const e = process.env[envName(flag)];
  return e ? { value: e, source: envName(flag) } : undefined;
}

function readSetting(s: { value: string; source: string }): Buffer {
  try {
    return readFileSync(s.value);
  } catch (err) {
    throw new Error(`${s.source} ${s.value}: cannot read the file (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

/** A bearer token: `--<prefix>token-file` / CODEMODE_<PREFIX>TOKEN_FILE, else CODEMODE_<PREFIX>TOKEN (the value itself). */
function token(values: Values, fileFlag: string, tokenEnv: string): string | undefined {
  const file = setting(values, fileFlag);
  if (file) return checkToken(readSetting(file).toString("utf8").trim(), `${file.source} ${file.value}`);
  const v = process.env[tokenEnv];
  return v ? checkToken(v.trim(), tokenEnv) : undefined;
}

/** Fails at start, naming the flags, when the certificate, key or CA cannot be used (bad PEM, key not the certificate's). */
function checkTls(sources: string, options: Parameters<typeof createSecureContext>[0]): void {
  try {
    createSecureContext(options);
  } catch (err) {
    throw new Error(`${sources}: ${(err as Error).message}`);
  }
}

/** A listening port's security from `--<prefix>tls-cert`, `-key`, `-client-ca` and its token. */
export function serverSecurity(values: Values, prefix: "" | "link-"): ServerSecurity {
  const cert = setting(values, `${prefix}tls-cert`);
  const key = setting(values, `${prefix}tls-key`);
  const clientCa = setting(values, `${prefix}tls-client-ca`);
  const out: ServerSecurity = {};
  if (cert || key) {
    if (!cert || !key)
      throw new UsageError(`--${prefix}tls-cert and --${prefix}tls-key go together (or ${envName(`${prefix}tls-cert`)} and ${envName(`${prefix}tls-key`)})`);
    const tls: ServerTls = { cert: readSetting(cert), key: readSetting(key), ...(clientCa ? { clientCa: readSetting(clientCa) } : {}) };
    checkTls(`${cert.source}, ${key.source}${clientCa ? `, ${clientCa.source}` : ""}`, {
      cert: tls.cert,
      key: tls.key,
      ...(tls.clientCa ? { ca: tls.clientCa } : {}),
    });
    out.tls = tls;
  } else if (clientCa) {
    throw new UsageError(`${clientCa.source} needs --${prefix}tls-cert and --${prefix}tls-key: mutual TLS is TLS with client certificates`);
  }
  const t = prefix === "" ? token(values, "auth-token-file", "CODEMODE_AUTH_TOKEN") : token(values, "link-token-file", "CODEMODE_LINK_TOKEN");
  if (t !== undefined) out.token = t;
  return out;
}

/** An outgoing connection's TLS from `--<prefix>tls-ca`, `-client-cert`, `-client-key`, `-server-name`; undefined: plaintext. */
export function clientTls(values: Values, prefix: "" | "link-"): ClientTls | undefined {
  const ca = setting(values, `${prefix}tls-ca`);
  const cert = setting(values, `${prefix}tls-client-cert`);
  const key = setting(values, `${prefix}tls-client-key`);
  const serverName = setting(values, `${prefix}tls-server-name`);
  if (!cert !== !key) throw new UsageError(`--${prefix}tls-client-cert and --${prefix}tls-client-key go together`);
  if (!ca && !cert) {
    if (serverName) throw new UsageError(`${serverName.source} needs --${prefix}tls-ca (or a client certificate): it names the server TLS verifies`);
    return undefined;
  }
  const tls: ClientTls = {};
  if (ca) tls.ca = readSetting(ca);
  if (cert && key) {
    tls.cert = readSetting(cert);
    tls.key = readSetting(key);
  }
  if (serverName) tls.serverName = serverName.value;
  checkTls(
    [ca, cert, key]
      .filter((s) => s !== undefined)
      .map((s) => s.source)
      .join(", "),
    { ...(tls.ca ? { ca: tls.ca } : {}), ...(tls.cert ? { cert: tls.cert, key: tls.key } : {}) },
  );
  return tls;
}

/** A client of the Sandbox and Control ports: TLS and the gateway bearer token. */
export function clientSecurity(values: Values): ClientSecurity {
  const tls = clientTls(values, "");
  const t = token(values, "auth-token-file", "CODEMODE_AUTH_TOKEN");
  return { ...(tls ? { tls } : {}), ...(t !== undefined ? { token: t } : {}) };
}

/** A sidecar's link to the orchestrator: link TLS and the link token. */
export function linkClientSecurity(values: Values): ClientSecurity {
  const tls = clientTls(values, "link-");
  const t = token(values, "link-token-file", "CODEMODE_LINK_TOKEN");
  return { ...(tls ? { tls } : {}), ...(t !== undefined ? { token: t } : {}) };
}

/**
 * The tenants of `--tenants-file` (or CODEMODE_TENANTS_FILE); none without it. Refused
 * together with a gateway bearer token (`server`'s): with tenants, each one's token is it.
 */
export async function tenantsOf(values: Values, server: ServerSecurity): Promise<Tenants> {
  // Loaded here, not with the flags: a server parses its flags before anything heavy loads.
  const { loadTenantsFile, Tenants } = await import("../shared/tenants.js");
  const file = setting(values, "tenants-file");
  if (!file) return Tenants.NONE;
  if (server.token !== undefined)
    throw new UsageError(
      `${file.source} and a gateway bearer token (--auth-token-file or CODEMODE_AUTH_TOKEN) cannot both be given: each tenant's token is its gateways'`,
    );
  return loadTenantsFile(file.value);
}

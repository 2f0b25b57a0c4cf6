/** `host:port` parsing for listen and dial addresses (port 0 means "pick one"). */

export type HostPort = { host: string; port: number };

export const DEFAULT_SANDBOX_ADDRESS = "127.0.0.1:7300";
export const DEFAULT_ORCHESTRATOR_ADDRESS = "127.0.0.1:7301";
/** The orchestrator's SidecarLink port (`codemode orchestrator`; `codemode start` picks a free loopback port). */
export const DEFAULT_LINK_ADDRESS = "127.0.0.1:7302";

/** A malformed address flag: a usage error (the CLI exits 2), as for other bad arguments. */
export class AddressError extends Error {
  override name = "AddressError";
  readonly code = "ERR_PARSE_ARGS_INVALID_ADDRESS";
}

export function parseHostPort(value: string, flag: string): HostPort {
  const m = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(value.trim());
  const port = m ? Number(m[2]) : NaN;
  if (!m?.[1] || port > 65535) {
    throw new AddressError(`${flag} must be HOST:PORT (port 0-65535), got ${JSON.stringify(value)}`);
  }
  return { host: m[1], port };
}

export function formatHostPort({ host, port }: HostPort): string {
  return `${host}:${port}`;
}

/**
 * What a bearer token may be. Apart from ./credentials.ts (which loads grpc-js) so that
 * reading the command line's security flags does not load gRPC: `codemode start` starts
 * its sandbox pool before the servers' modules load.
 */

/** A token must be sendable as metadata: printable ASCII, no spaces. */
export function checkToken(token: string, source: string): string {
  if (!/^[\x21-\x7e]+$/.test(token)) throw new Error(`${source}: a bearer token must be non-empty printable ASCII without spaces`);
  return token;
}

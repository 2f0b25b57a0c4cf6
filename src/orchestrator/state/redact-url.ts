/**
 * Store URLs without their password, for logs and errors. Apart from the Redis store so
 * that checking a store setting (./create-store.ts) never loads ioredis for a memory store.
 */

/** The URL without its password, for logs and errors. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    u.password = "";
    return u.toString();
  } catch {
    return url.includes("@") ? "(an unparsable URL with credentials)" : url;
  }
}

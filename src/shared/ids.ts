/** Random identifiers: unguessable, URL-safe, prefixed by what they name. */
import { randomBytes } from "node:crypto";

export function newId(prefix: string, bytes = 12): string {
  return `${prefix}_${randomBytes(bytes).toString("base64url")}`;
}

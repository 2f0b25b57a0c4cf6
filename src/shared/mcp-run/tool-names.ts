/**
 * MCP tool names in catalog ids. A catalog entry's name (and so its id
 * `mcp:<server>:<name>`) may only hold letters, digits, `_`, `-` and `.` (at most 128),
 * but an MCP server may name a tool anything (`files/read`, `get weather`, `météo`).
 * Spec 6.1 wants every tool reachable under a legal export name derived from its
 * canonical name, so the MCP front carries such a name into the catalog escaped, and the
 * sandbox's naming table (./naming.ts) reads the canonical name back.
 *
 * The escape is reversible and leaves every name that needs none unchanged:
 * `_u.` followed by the UTF-8 bytes of the name, each byte outside `[A-Za-z0-9.-]` written
 * as `_` and two lower-case hex digits (`files/read` → `_u.files_2fread`). A name that
 * starts with `_u.` is escaped too, so the mapping is one-to-one; a catalog name is read
 * back only when escaping the result gives exactly that name, so a name some other
 * gateway chose that merely looks escaped stays as it is.
 */

const PREFIX = "_u.";
const CATALOG_NAME = /^[A-Za-z0-9_.-]{1,128}$/;
const PLAIN_BYTE = /^[A-Za-z0-9.-]$/;
const utf8 = new TextEncoder();
const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/** The name as a catalog entry can hold it, or undefined when even escaped it is longer than 128. */
export function catalogToolName(toolName: string): string | undefined {
  if (CATALOG_NAME.test(toolName) && !toolName.startsWith(PREFIX)) return toolName;
  if (toolName === "") return undefined;
  let out = PREFIX;
  for (const byte of utf8.encode(toolName)) {
    const c = String.fromCharCode(byte);
    out += PLAIN_BYTE.test(c) ? c : `_${byte.toString(16).padStart(2, "0")}`;
    if (out.length > 128) return undefined;
  }
  return out;
}

/** The canonical MCP tool name of a catalog entry's name (itself unless it is an escape catalogToolName made). */
export function canonicalToolName(catalogName: string): string {
  if (!catalogName.startsWith(PREFIX)) return catalogName;
  const body = catalogName.slice(PREFIX.length);
  const bytes: number[] = [];
  for (let i = 0; i < body.length; i++) {
    const c = body[i]!;
    if (c !== "_") {
      bytes.push(c.charCodeAt(0));
      continue;
    }
    const hex = body.slice(i + 1, i + 3);
    if (!/^[0-9a-f]{2}$/.test(hex)) return catalogName;
    bytes.push(parseInt(hex, 16));
    i += 2;
  }
  let name: string;
  try {
    name = strictUtf8.decode(new Uint8Array(bytes));
  } catch {
    return catalogName;
  }
  return catalogToolName(name) === catalogName ? name : catalogName;
}

/**
 * A catalog version's guest tables, shared with the workers instead of copied per exec.
 *
 * The compact catalog a VM may read (MCP and namespace tables, ALL_TOOLS, the convenience
 * names) is large for a large catalog. Posted with every task, it would be copied
 * (structured clone) on every exec, so exec cost would grow with the catalog. The main
 * thread instead encodes each version once into a SharedArrayBuffer (posting one moves no
 * bytes), and each worker decodes a version once and keeps it; a worker's prepared VM image
 * is keyed by the version too (../worker/warm-vms.ts).
 */

/**
 * The compact catalog a VM starts with, serialized once per catalog version: JSON text
 * of {mcp: [key, server, [fn, id][],
 * resources, prompts][], namespaces: [id, globalName, scopeJson][]}.
 */
export type GuestCatalog = {
  /** The catalog version (set for a run's catalog): tasks carry it shared, see `SharedCatalog` below. */
  version?: string;
  staticJson: string;
  /**
   * JSON array of the ALL_TOOLS entries, handed to the VM only when the program first
   * reads ALL_TOOLS, so a large catalog costs nothing to a program that does not.
   */
  allToolsJson: string;
  /** JSON of [safeName, catalogId][] for tools.<safeName>, read by the guest on first use. */
  convenienceJson: string;
  /** True when namespaces may reference the run context (it is sent per exec). */
  needsContext: boolean;
};

/** A catalog version as a task carries it to a worker. */
export type SharedCatalog = { version: string; buffer: SharedArrayBuffer; needsContext: boolean };

const HEADER = 12;
const encoded = new WeakMap<GuestCatalog, SharedCatalog>();

/** Main thread: the shared form of a versioned catalog (made once), or the catalog itself when it has no version. */
export function shareCatalog(c: GuestCatalog): GuestCatalog | SharedCatalog {
  if (!c.version) return c;
  let s = encoded.get(c);
  if (!s) {
    const parts = [c.staticJson, c.allToolsJson, c.convenienceJson];
    const lengths = parts.map((p) => Buffer.byteLength(p, "utf8"));
    const buffer = new SharedArrayBuffer(HEADER + lengths[0]! + lengths[1]! + lengths[2]!);
    const view = new DataView(buffer);
    const bytes = Buffer.from(buffer);
    let at = HEADER;
    parts.forEach((p, i) => {
      view.setUint32(i * 4, lengths[i]!, true);
      bytes.write(p, at, "utf8");
      at += lengths[i]!;
    });
    s = { version: c.version, buffer, needsContext: c.needsContext };
    encoded.set(c, s);
  }
  return s;
}

export function isShared(c: GuestCatalog | SharedCatalog): c is SharedCatalog {
  return (c as SharedCatalog).buffer !== undefined;
}

/** Versions a worker keeps decoded. */
const MAX_DECODED = 16;
const decoded = new Map<string, GuestCatalog>();

/** Worker: the catalog's tables, decoded once per version. */
export function openCatalog(c: GuestCatalog | SharedCatalog): GuestCatalog {
  if (!isShared(c)) return c;
  const known = decoded.get(c.version);
  if (known) return known;
  const view = new DataView(c.buffer);
  const bytes = Buffer.from(c.buffer);
  const parts: string[] = [];
  let at = HEADER;
  for (let i = 0; i < 3; i++) {
    const n = view.getUint32(i * 4, true);
    parts.push(bytes.toString("utf8", at, at + n));
    at += n;
  }
  const guest: GuestCatalog = { version: c.version, staticJson: parts[0]!, allToolsJson: parts[1]!, convenienceJson: parts[2]!, needsContext: c.needsContext };
  decoded.set(c.version, guest);
  if (decoded.size > MAX_DECODED) decoded.delete(decoded.keys().next().value!);
  return guest;
}

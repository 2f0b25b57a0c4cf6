/**
 * The session store: code mode's `store` / `load` values, kept per session (agent id and
 * session key) across its cells, agent runs and orchestrator restarts. One interface, two
 * stores with the same semantics: in memory (here) and Redis (./redis-sessions.ts). A commit
 * is a segment's writes, applied whole or refused whole when the session would pass the
 * committing run's key or byte limit; each write moves the session's expiry to its TTL
 * from now. Bytes count each key's and value's UTF-8. A tenant's store (a tenants file)
 * also counts the bytes of all its sessions, and refuses a commit past its `maxStoreBytes`.
 */
import { storeBytesRefusal } from "../tenants/store-quotas.js";

export type SessionEntry = { key: string; json: string };
export type SessionLimits = { maxKeys: number; maxBytes: number; ttlSeconds: number };
export type CommitResult = { ok: true; keys: number; bytes: number } | { ok: false; refused: string; keys: number; bytes: number };
export type SessionInfo = { entries: SessionEntry[]; bytes: number; expiresAtMs: number };

/** A tenant's store: counts its sessions' bytes together, and refuses a commit past `maxStoreBytes`. */
export type StoreAccount = { tenant: string; maxStoreBytes?: number; refused?: () => void };

export interface SessionStore {
  /** The session's entries in key order (none when it has none or expired). */
  load(session: string): Promise<SessionEntry[]>;
  /** Applies `writes` (each key once), or refuses them all when a limit would be passed. */
  commit(session: string, writes: readonly SessionEntry[], limits: SessionLimits): Promise<CommitResult>;
  /** The entries with their size and expiry, for a gateway. */
  info(session: string): Promise<SessionInfo>;
  /** Deletes the session's store; returns how many keys it held. */
  clear(session: string): Promise<number>;
  /** What all its sessions hold (with an account: a tenant's; else 0). */
  totalBytes(): Promise<number>;
  close(): Promise<void>;
}

const utf8 = (s: string) => Buffer.byteLength(s, "utf8");

/** The refusal of a commit that would leave `keys` keys and `bytes` bytes. */
export function overLimit(keys: number, bytes: number, limits: SessionLimits): string | undefined {
  if (keys > limits.maxKeys) return `the session store would hold ${keys} keys, over maxSessionKeys (${limits.maxKeys})`;
  if (bytes > limits.maxBytes) return `the session store would hold ${bytes} bytes, over maxSessionBytes (${limits.maxBytes})`;
  return undefined;
}

type Held = { entries: Map<string, string>; bytes: number; expiresAtMs: number };

const SWEEP_INTERVAL_MS = 60_000;

export class MemorySessionStore implements SessionStore {
  private readonly sessions = new Map<string, Held>();
  private readonly sweeper = setInterval(() => this.sweep(), SWEEP_INTERVAL_MS).unref();
  /** The live sessions' bytes together. */
  private total = 0;

  constructor(private readonly account?: StoreAccount) {}

  async load(session: string): Promise<SessionEntry[]> {
    const held = this.live(session);
    return held ? sorted(held.entries) : [];
  }

  async commit(session: string, writes: readonly SessionEntry[], limits: SessionLimits): Promise<CommitResult> {
    const held = this.live(session) ?? { entries: new Map<string, string>(), bytes: 0, expiresAtMs: 0 };
    let keys = held.entries.size;
    let bytes = held.bytes;
    for (const w of writes) {
      const old = held.entries.get(w.key);
      if (old === undefined) keys++;
      else bytes -= utf8(w.key) + utf8(old);
      bytes += utf8(w.key) + utf8(w.json);
    }
    const refused = overLimit(keys, bytes, limits) ?? this.overAccount(held.bytes, bytes);
    if (refused) return { ok: false, refused, keys: held.entries.size, bytes: held.bytes };
    for (const w of writes) held.entries.set(w.key, w.json);
    this.total += bytes - held.bytes;
    held.bytes = bytes;
    held.expiresAtMs = Date.now() + limits.ttlSeconds * 1000;
    this.sessions.set(session, held);
    return { ok: true, keys, bytes };
  }

  async info(session: string): Promise<SessionInfo> {
    const held = this.live(session);
    return held ? { entries: sorted(held.entries), bytes: held.bytes, expiresAtMs: held.expiresAtMs } : { entries: [], bytes: 0, expiresAtMs: 0 };
  }

  async clear(session: string): Promise<number> {
    const held = this.live(session);
    if (held) this.total -= held.bytes;
    this.sessions.delete(session);
    return held?.entries.size ?? 0;
  }

  async totalBytes(): Promise<number> {
    this.sweep();
    return this.account ? this.total : 0;
  }

  /** The refusal of a commit that takes a session from `had` to `bytes`, past the tenant's maxStoreBytes. */
  private overAccount(had: number, bytes: number): string | undefined {
    const max = this.account?.maxStoreBytes;
    if (max === undefined || this.total - had + bytes <= max) return undefined;
    // Only near the quota: sessions that expired since the last sweep no longer count.
    this.sweep();
    const total = this.total - had + bytes;
    if (total <= max) return undefined;
    this.account?.refused?.();
    return storeBytesRefusal(this.account!.tenant, max, total);
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
  }

  private live(session: string): Held | undefined {
    const held = this.sessions.get(session);
    if (held && held.expiresAtMs <= Date.now()) {
      this.sessions.delete(session);
      this.total -= held.bytes;
      return undefined;
    }
    return held;
  }

  private sweep(): void {
    for (const session of [...this.sessions.keys()]) this.live(session);
  }
}

function sorted(entries: Map<string, string>): SessionEntry[] {
  return [...entries.keys()].sort().map((key) => ({ key, json: entries.get(key)! }));
}

/**
 * Seals snapshot envelopes with authenticated encryption (AES-256-GCM) under a key only
 * sidecars hold, and replay records with an HMAC under the same keys. A snapshot is VM
 * memory, tool results included: the orchestrator and its store keep sealed bytes they can
 * neither read nor forge. The associated data binds the ciphertext to the code-mode run id,
 * the scope, the run's stored metadata, its generation in the store and a not-after time, so
 * a moved, edited, older or expired snapshot is refused. A record's seal binds its text to
 * the run id and scope, so a rebuild by replay (./rebuild.ts) runs only what a sidecar wrote.
 * Checks run on the main thread; a key must never enter a thread that runs guest code.
 *
 * Keys come from CODEMODE_SNAPSHOT_KEYS (`id:secret` entries: the first seals, every one
 * opens) and CODEMODE_SNAPSHOT_KEY (one bare secret; beside the list, for reading only);
 * without any, a per-process random key, so only that process can resume its runs. Sealed
 * layout, key rules and rotation: docs/module-notes.md#srcsandboxsuspendsnapshot-sealts.
 */
import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes, timingSafeEqual } from "node:crypto";

const MAGIC = Buffer.from("CMSS", "ascii");
const VERSION = 2;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;
/** Header bytes besides the key id: magic, version, id length, nonce, generation, not-after. */
const FIXED_HEADER_BYTES = MAGIC.length + 2 + NONCE_BYTES + 8 + 8;
/** Tolerated clock difference between the sidecar that sealed and the one that opens. */
const CLOCK_SLACK_MS = 60_000;
const CONTEXT = "codemode-snapshot-v2";
/** A replay record's seal: `"seal":"cmrs1:<key id>:<HMAC-SHA256, base64url>"`, its last member. */
const RECORD_SEAL_VERSION = "cmrs1";
const RECORD_CONTEXT = "codemode-replay-record-v1";
const RECORD_SEAL_TAIL = /,"seal":"([^"\\]*)"\}$/;
const MAC_BYTES = 32;
const HKDF_SALT = Buffer.from("codemode snapshot seal", "utf8");
export const SNAPSHOT_KEY_ENV = "CODEMODE_SNAPSHOT_KEY";
export const SNAPSHOT_KEYS_ENV = "CODEMODE_SNAPSHOT_KEYS";
const MIN_KEY_CHARS = 32;
const KEY_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;

/** Bytes a seal adds to an envelope sealed under `keyId`. */
export const sealOverhead = (keyId: string): number => FIXED_HEADER_BYTES + Buffer.byteLength(keyId, "ascii") + TAG_BYTES;

export class SnapshotAuthError extends Error {
  override name = "SnapshotAuthError";
}

/**
 * The snapshot names a key id this sidecar does not hold: a key another sidecar has (or
 * one retired here). Not evidence of tampering, so the run is left for a sidecar that
 * has the key.
 */
export class SnapshotKeyUnavailableError extends SnapshotAuthError {
  override name = "SnapshotKeyUnavailableError";
  constructor(readonly keyId: string) {
    super(`the snapshot was sealed under key id "${keyId}", which this sidecar does not have`);
  }
}

/**
 * What a seal binds the envelope to: `meta` is the run's stored metadata, canonically
 * encoded; `generation` the run's generation in the store (bumped by every SuspendRun).
 */
export type SealContext = { codeModeRunId: string; scopeKey: string; meta: string; generation: number };

/** What a replay record's seal binds its text to: the run it was recorded for. */
export type RecordSealContext = { codeModeRunId: string; scopeKey: string };

/** A replay record whose seal is missing, malformed, or does not match its text and run. */
export class RecordAuthError extends Error {
  override name = "RecordAuthError";
  constructor(
    message: string,
    /** True when nothing says the record was changed (it carries no seal: an older build may have written it). */
    readonly unsealed = false,
  ) {
    super(message);
  }
}

/** The record's seal names a key id this sidecar does not hold. */
export class RecordKeyUnavailableError extends RecordAuthError {
  override name = "RecordKeyUnavailableError";
  constructor(readonly keyId: string) {
    super(`the replay record was sealed under key id "${keyId}", which this sidecar does not have`);
  }
}

/** `key` encrypts snapshots; `mac` signs replay records (both derived from the same secret). */
type SealKey = { id: string; key: Buffer; mac: Buffer };

const hkdf = (secret: string, info: string, bytes: number) => Buffer.from(hkdfSync("sha256", Buffer.from(secret, "utf8"), HKDF_SALT, info, bytes));

/** The id of a secret listed without one. One-way: it does not reveal the secret. */
export function derivedKeyId(secret: string): string {
  return `key-${hkdf(secret, "codemode snapshot key id", 6).toString("hex")}`;
}

function recordMac(mac: Buffer, keyId: string, text: string, ctx: RecordSealContext): Buffer {
  const context = JSON.stringify([RECORD_CONTEXT, ctx.codeModeRunId, ctx.scopeKey, keyId]);
  return createHmac("sha256", mac)
    .update(context, "utf8")
    .update(Buffer.from([0]))
    .update(text, "utf8")
    .digest();
}

function associatedData(header: Buffer, ctx: SealContext): Buffer {
  const context = JSON.stringify([CONTEXT, ctx.codeModeRunId, ctx.scopeKey, ctx.meta, ctx.generation]);
  return Buffer.concat([header, Buffer.from([0]), Buffer.from(context, "utf8")]);
}

export class SnapshotSealer {
  private constructor(
    /** The first seals; all open. */
    private readonly keys: readonly SealKey[],
    /** True when the keys came from the environment (shared by replicas). */
    readonly shared: boolean,
  ) {}

  /**
   * The keys from CODEMODE_SNAPSHOT_KEYS and CODEMODE_SNAPSHOT_KEY, or a random
   * per-process key when neither is set. Errors never quote a secret.
   */
  static fromEnv(env: NodeJS.ProcessEnv = process.env): SnapshotSealer {
    const keys: SealKey[] = [];
    const add = (id: string, secret: string, what: string) => {
      if (secret.length < MIN_KEY_CHARS) throw new Error(`${what} must be at least ${MIN_KEY_CHARS} characters (got ${secret.length})`);
      const key = hkdf(secret, "codemode snapshot aes-256-gcm key", 32);
      const same = keys.find((k) => k.id === id);
      if (same && !same.key.equals(key)) throw new Error(`${SNAPSHOT_KEYS_ENV} and ${SNAPSHOT_KEY_ENV} name key id "${id}" with two different secrets`);
      if (!same) keys.push({ id, key, mac: hkdf(secret, "codemode replay record hmac-sha256 key", MAC_BYTES) });
    };
    const list = env[SNAPSHOT_KEYS_ENV];
    if (list !== undefined && list.trim() !== "") {
      for (const raw of list.split(",")) {
        const entry = raw.trim();
        if (entry === "") continue;
        const colon = entry.indexOf(":");
        if (colon < 0) {
          add(derivedKeyId(entry), entry, `each secret in ${SNAPSHOT_KEYS_ENV}`);
          continue;
        }
        const id = entry.slice(0, colon);
        // The text before ":" may be part of a mistyped secret: never echoed.
        if (!KEY_ID.test(id))
          throw new Error(
            `an entry of ${SNAPSHOT_KEYS_ENV} has an invalid key id before ":" (ids are 1-64 of A-Z a-z 0-9 . _ -, starting with a letter or digit)`,
          );
        add(id, entry.slice(colon + 1), `the secret of key id "${id}" in ${SNAPSHOT_KEYS_ENV}`);
      }
      if (keys.length === 0) throw new Error(`${SNAPSHOT_KEYS_ENV} is set but lists no keys`);
    }
    const single = env[SNAPSHOT_KEY_ENV];
    if (single !== undefined && single !== "") add(derivedKeyId(single), single, SNAPSHOT_KEY_ENV);
    if (keys.length === 0)
      return new SnapshotSealer([{ id: `process-${randomBytes(6).toString("hex")}`, key: randomBytes(32), mac: randomBytes(MAC_BYTES) }], false);
    return new SnapshotSealer(keys, true);
  }

  /** The id new snapshots are sealed under. */
  get sealingKeyId(): string {
    return this.keys[0]!.id;
  }

  /** Every key id this sidecar opens, the sealing one first. */
  get keyIds(): string[] {
    return this.keys.map((k) => k.id);
  }

  seal(envelope: Uint8Array, ctx: SealContext, notAfterMs: number): Uint8Array {
    if (!Number.isSafeInteger(ctx.generation) || ctx.generation < 0) throw new RangeError(`generation ${ctx.generation} is not a non-negative integer`);
    const { id, key } = this.keys[0]!;
    const header = Buffer.alloc(FIXED_HEADER_BYTES + id.length);
    let at = MAGIC.copy(header, 0);
    at = header.writeUInt8(VERSION, at);
    at = header.writeUInt8(id.length, at);
    at += header.write(id, at, "ascii");
    const nonce = randomBytes(NONCE_BYTES);
    at += nonce.copy(header, at);
    at = header.writeBigUInt64LE(BigInt(ctx.generation), at);
    header.writeBigUInt64LE(BigInt(Math.max(0, Math.ceil(notAfterMs))), at);
    const cipher = createCipheriv("aes-256-gcm", key, nonce, { authTagLength: TAG_BYTES });
    cipher.setAAD(associatedData(header, ctx));
    return Buffer.concat([header, cipher.update(envelope), cipher.final(), cipher.getAuthTag()]);
  }

  /**
   * The envelope inside a sealed snapshot. SnapshotKeyUnavailableError when it names a
   * key id this sidecar does not hold; SnapshotAuthError when anything else does not hold.
   */
  open(sealed: Uint8Array, ctx: SealContext, nowMs = Date.now()): Uint8Array {
    const b = Buffer.from(sealed.buffer, sealed.byteOffset, sealed.byteLength);
    if (b.byteLength < MAGIC.length + 2 || !b.subarray(0, MAGIC.length).equals(MAGIC)) {
      throw new SnapshotAuthError("the snapshot is not sealed in a format this build reads (truncated, tampered, or sealed by an older build)");
    }
    const version = b.readUInt8(MAGIC.length);
    if (version !== VERSION) throw new SnapshotAuthError(`the snapshot's seal version ${version} is not supported`);
    const idLength = b.readUInt8(MAGIC.length + 1);
    const headerLength = FIXED_HEADER_BYTES + idLength;
    if (b.byteLength < headerLength + TAG_BYTES) throw new SnapshotAuthError("the snapshot is truncated");
    let at = MAGIC.length + 2;
    const id = b.toString("latin1", at, at + idLength);
    if (!KEY_ID.test(id)) throw new SnapshotAuthError("the snapshot's key id is malformed");
    at += idLength;
    const nonce = b.subarray(at, at + NONCE_BYTES);
    at += NONCE_BYTES;
    const generation = b.readBigUInt64LE(at);
    const notAfter = b.readBigUInt64LE(at + 8);
    const entry = this.keys.find((k) => k.id === id);
    if (!entry) throw new SnapshotKeyUnavailableError(id);
    // Refusing on the header's (not yet authenticated) generation is safe: a match is
    // authenticated below, with the store's generation in the associated data too.
    if (generation !== BigInt(ctx.generation)) {
      throw new SnapshotAuthError(
        `the snapshot was sealed for generation ${generation} of this run but the store is at generation ${ctx.generation} (an older snapshot was put back, or the record was edited)`,
      );
    }
    const decipher = createDecipheriv("aes-256-gcm", entry.key, nonce, { authTagLength: TAG_BYTES });
    decipher.setAAD(associatedData(b.subarray(0, headerLength), ctx));
    decipher.setAuthTag(b.subarray(b.byteLength - TAG_BYTES));
    let envelope: Buffer;
    try {
      envelope = Buffer.concat([decipher.update(b.subarray(headerLength, b.byteLength - TAG_BYTES)), decipher.final()]);
    } catch {
      throw new SnapshotAuthError(
        "the snapshot's seal does not match (tampered, moved to another run, its record edited, or sealed under another secret with the same key id)",
      );
    }
    if (BigInt(nowMs - CLOCK_SLACK_MS) > notAfter) throw new SnapshotAuthError("the snapshot's seal has expired (an old snapshot was replayed)");
    return envelope;
  }

  /**
   * A replay record's JSON text (an object) with its seal added as its last member, `seal`:
   * an HMAC of the text as given under the sealing key, bound to the run's id and scope.
   */
  sealRecord(json: string, ctx: RecordSealContext): string {
    if (!json.startsWith("{") || !json.endsWith("}") || json === "{}") throw new RangeError("a replay record to seal must be a JSON object with members");
    const { id, mac } = this.keys[0]!;
    const seal = `${RECORD_SEAL_VERSION}:${id}:${recordMac(mac, id, json, ctx).toString("base64url")}`;
    return `${json.slice(0, -1)},"seal":"${seal}"}`;
  }

  /**
   * The record's text as it was sealed (its seal taken off), once its seal verifies for this
   * run. RecordKeyUnavailableError when it names a key id this sidecar does not hold;
   * RecordAuthError (`unsealed` set) when it carries no seal; RecordAuthError when anything
   * else does not hold.
   */
  openRecord(sealed: string, ctx: RecordSealContext): string {
    const m = RECORD_SEAL_TAIL.exec(sealed);
    if (!m) {
      if (sealed.includes('"seal":'))
        throw new RecordAuthError(
          "the replay record's seal is not where this build puts it (the record was altered, or sealed in a format this build does not read)",
        );
      throw new RecordAuthError("the replay record carries no seal (it was altered, or recorded by a build that did not seal records)", true);
    }
    const parts = m[1]!.split(":");
    if (parts.length !== 3 || parts[0] !== RECORD_SEAL_VERSION)
      throw new RecordAuthError("the replay record's seal is malformed or of a version this build does not read");
    const [, id, tag] = parts as [string, string, string];
    if (!KEY_ID.test(id)) throw new RecordAuthError("the replay record's key id is malformed");
    const entry = this.keys.find((k) => k.id === id);
    if (!entry) throw new RecordKeyUnavailableError(id);
    const text = `${sealed.slice(0, m.index)}}`;
    const given = Buffer.from(tag, "base64url");
    const expected = recordMac(entry.mac, id, text, ctx);
    if (given.byteLength !== expected.byteLength || !timingSafeEqual(given, expected)) {
      throw new RecordAuthError(
        "the replay record's seal does not match (the record was altered, moved to another run, or sealed under another secret with the same key id)",
      );
    }
    return text;
  }
}

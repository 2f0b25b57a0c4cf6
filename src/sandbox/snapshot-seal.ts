/**
 * Authenticates snapshot envelopes. A snapshot is VM memory: restoring a forged one
 * would hand an attacker the sandbox's state machine, so every envelope leaves a
 * sidecar sealed with HMAC-SHA256 under a key only sidecars hold (the orchestrator and
 * its store keep sealed bytes and can neither read nor forge them). The MAC also covers
 * the code-mode run id and scope, so a valid envelope moved to another run's record is
 * refused too. The check runs on the main thread, before any worker sees the bytes.
 *
 * Every sidecar that may resume another's runs needs the same key: set
 * CODEMODE_SNAPSHOT_KEY (at least 32 characters). Without it a sidecar makes a random
 * key, and only that process can resume the runs it suspended.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

export const SEAL_BYTES = 32;
const CONTEXT = "codemode-snapshot-v1";
export const SNAPSHOT_KEY_ENV = "CODEMODE_SNAPSHOT_KEY";
const MIN_KEY_CHARS = 32;

export class SnapshotAuthError extends Error {
  override name = "SnapshotAuthError";
}

export type SealContext = { codeModeRunId: string; scopeKey: string };

export class SnapshotSealer {
  private constructor(
    private readonly key: Buffer,
    /** True when the key came from the environment (shared by replicas). */
    readonly shared: boolean,
  ) {}

  /** The key from CODEMODE_SNAPSHOT_KEY, or a random per-process key when it is unset. */
  static fromEnv(env: NodeJS.ProcessEnv = process.env): SnapshotSealer {
    const raw = env[SNAPSHOT_KEY_ENV];
    if (raw === undefined || raw === "") return new SnapshotSealer(randomBytes(32), false);
    if (raw.length < MIN_KEY_CHARS) throw new Error(`${SNAPSHOT_KEY_ENV} must be at least ${MIN_KEY_CHARS} characters (got ${raw.length})`);
    return new SnapshotSealer(Buffer.from(raw, "utf8"), true);
  }

  private mac(envelope: Uint8Array, ctx: SealContext): Buffer {
    return createHmac("sha256", this.key).update(`${CONTEXT}\0${ctx.codeModeRunId}\0${ctx.scopeKey}\0`).update(envelope).digest();
  }

  seal(envelope: Uint8Array, ctx: SealContext): Uint8Array {
    const out = Buffer.allocUnsafe(envelope.byteLength + SEAL_BYTES);
    out.set(envelope, 0);
    this.mac(envelope, ctx).copy(out, envelope.byteLength);
    return out;
  }

  /** The envelope inside a sealed snapshot, or SnapshotAuthError when the seal does not match. */
  open(sealed: Uint8Array, ctx: SealContext): Uint8Array {
    if (sealed.byteLength <= SEAL_BYTES) throw new SnapshotAuthError("the snapshot is truncated");
    const envelope = sealed.subarray(0, sealed.byteLength - SEAL_BYTES);
    const given = sealed.subarray(sealed.byteLength - SEAL_BYTES);
    if (!timingSafeEqual(this.mac(envelope, ctx), given)) {
      throw new SnapshotAuthError("the snapshot's seal does not match (tampered, foreign, or sealed under another key)");
    }
    return envelope;
  }
}

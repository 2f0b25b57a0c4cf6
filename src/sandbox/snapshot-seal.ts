/**
 * Authenticates snapshot envelopes. A snapshot is VM memory: restoring a forged one
 * would hand an attacker the sandbox's state machine, so every envelope leaves a
 * sidecar sealed with HMAC-SHA256 under a key only sidecars hold (the orchestrator and
 * its store keep sealed bytes they cannot forge; the bytes are authenticated, not
 * encrypted). The MAC also covers the code-mode run id, the scope and the run's stored
 * metadata (config, reason, pending calls, output used), so a valid envelope moved to
 * another run's record, or a record whose limits or pending calls were edited, is
 * refused too; and a not-after time, so an old sealed snapshot replayed into the store
 * is refused once its TTL (plus clock slack) has passed. The check runs on the main
 * thread, before any worker sees the bytes.
 *
 * Sealed layout: envelope ‖ not-after (u64 LE, ms since epoch) ‖ HMAC-SHA256.
 *
 * Every sidecar that may resume another's runs needs the same key: set
 * CODEMODE_SNAPSHOT_KEY (at least 32 characters). Without it a sidecar makes a random
 * key, and only that process can resume the runs it suspended.
 */
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

const MAC_BYTES = 32;
/** Bytes a seal adds to an envelope. */
export const SEAL_BYTES = 8 + MAC_BYTES;
/** Tolerated clock difference between the sidecar that sealed and the one that opens. */
const CLOCK_SLACK_MS = 60_000;
const CONTEXT = "codemode-snapshot-v1";
export const SNAPSHOT_KEY_ENV = "CODEMODE_SNAPSHOT_KEY";
const MIN_KEY_CHARS = 32;

export class SnapshotAuthError extends Error {
  override name = "SnapshotAuthError";
}

/** What a seal binds the envelope to; `meta` is the run's stored metadata, canonically encoded. */
export type SealContext = { codeModeRunId: string; scopeKey: string; meta: string };

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

  private mac(body: Uint8Array, ctx: SealContext): Buffer {
    const context = JSON.stringify([CONTEXT, ctx.codeModeRunId, ctx.scopeKey, ctx.meta]);
    return createHmac("sha256", this.key).update(`${context}\0`).update(body).digest();
  }

  seal(envelope: Uint8Array, ctx: SealContext, notAfterMs: number): Uint8Array {
    const out = Buffer.allocUnsafe(envelope.byteLength + SEAL_BYTES);
    out.set(envelope, 0);
    out.writeBigUInt64LE(BigInt(Math.max(0, Math.ceil(notAfterMs))), envelope.byteLength);
    this.mac(out.subarray(0, envelope.byteLength + 8), ctx).copy(out, envelope.byteLength + 8);
    return out;
  }

  /** The envelope inside a sealed snapshot, or SnapshotAuthError when the seal does not hold. */
  open(sealed: Uint8Array, ctx: SealContext, nowMs = Date.now()): Uint8Array {
    if (sealed.byteLength <= SEAL_BYTES) throw new SnapshotAuthError("the snapshot is truncated");
    const body = sealed.subarray(0, sealed.byteLength - MAC_BYTES);
    const given = sealed.subarray(sealed.byteLength - MAC_BYTES);
    if (!timingSafeEqual(this.mac(body, ctx), given)) {
      throw new SnapshotAuthError("the snapshot's seal does not match (tampered, foreign, or sealed under another key)");
    }
    const notAfter = Buffer.from(body.buffer, body.byteOffset, body.byteLength).readBigUInt64LE(body.byteLength - 8);
    if (BigInt(nowMs - CLOCK_SLACK_MS) > notAfter) throw new SnapshotAuthError("the snapshot's seal has expired (an old snapshot was replayed)");
    return body.subarray(0, body.byteLength - 8);
  }
}

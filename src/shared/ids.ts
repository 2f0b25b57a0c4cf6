/**
 * Random identifiers: unguessable, URL-safe, prefixed by what they name.
 *
 * Bytes come from the CSPRNG in POOL_BYTES refills rather than one `randomBytes` call per
 * id: ids are made per exec and per nested call (several per tool call), where a CSPRNG
 * call and a buffer allocation per id show in a worker's time. Every byte is used once;
 * the pool is per thread.
 */
import { randomFillSync } from "node:crypto";

const POOL_BYTES = 4096;
const pool = Buffer.allocUnsafe(POOL_BYTES);
let used = POOL_BYTES;

/** `n` (at most 4096) fresh random bytes, valid until the next call (copy to keep them). */
function take(n: number): Buffer {
  if (used + n > POOL_BYTES) {
    randomFillSync(pool);
    used = 0;
  }
  const out = pool.subarray(used, used + n);
  used += n;
  return out;
}

/** `bytes` random bytes as base64url (no padding). */
export function randomText(bytes: number): string {
  return take(bytes).toString("base64url");
}

export function newId(prefix: string, bytes = 12): string {
  return `${prefix}_${randomText(bytes)}`;
}

/** 128 bits of crypto randomness as four unsigned 32-bit words. */
export function randomWords(): number[] {
  const b = take(16);
  return [b.readUInt32LE(0), b.readUInt32LE(4), b.readUInt32LE(8), b.readUInt32LE(12)];
}

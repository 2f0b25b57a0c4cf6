/**
 * Turns a QuickJS VM snapshot into the compact envelope the store keeps, and back.
 *
 * A raw snapshot is the VM's whole linear memory, most of it identical to a fresh VM, so
 * the memory is stored as a page delta against this build's base image (./base-image.ts: a
 * bitmap of changed pages, each XORed with the base) and brotli-compressed; when most pages
 * changed, the plain memory is compressed too and the smaller wins. The envelope starts
 * with the magic "CMSN" and a version, and carries the engine fingerprint, the VM's
 * pointers, the guest handle token and the loaded extensions (layout:
 * docs/module-notes.md#srcsandboxworkersnapshot-codects).
 *
 * Authentication is added and checked on the main thread (../suspend/snapshot-seal.ts): the
 * key never enters a thread that runs guest code. Decoding still treats every field as
 * untrusted; sizes are bounded before anything is allocated.
 */
import { brotliCompressSync, brotliDecompressSync, constants as zlib } from "node:zlib";
import type { Snapshot } from "quickjs-wasi";
import type { BaseImage } from "./base-image.js";

const MAGIC = 0x4e534d43; // "CMSN" read as little-endian u32
const VERSION = 2;
const HEADER_BYTES = 64;
const MAX_EXTENSION_TABLE = 4096;
/** Native extensions a snapshot may name (the worker loads these by name). */
/** Why a snapshot of another sandbox build does not open here (../suspend/rebuild.ts rebuilds such a run by replay). */
export const OTHER_BUILD = "the snapshot was made by a different sandbox build (engine fingerprint differs)";

export const KNOWN_EXTENSIONS: ReadonlySet<string> = new Set(["url"]);
const PAGE = 4096;
const WASM_PAGE = 65536;
/** The largest memory a restore accepts: the largest memory limit plus headroom. */
const MAX_MEMORY_BYTES = 1_073_741_824 + 64 * WASM_PAGE;

export const ENCODING_PLAIN = 0;
export const ENCODING_DELTA = 1;

export class SnapshotFormatError extends Error {
  override name = "SnapshotFormatError";
}

export type EncodedSnapshot = { envelope: Uint8Array; encoding: number; memoryBytes: number; changedPages: number };
/** A decoded snapshot with the guest handle token it carries. */
export type DecodedSnapshot = Snapshot & { guestToken: number };

/**
 * Brotli quality 2: measured on a suspended run holding ~100 KB of live data, it encodes
 * in 4.4 ms to 96 KB where quality 5 took 14.7 ms for 82 KB (a trivial run: 6.2 KB, 1.2 ms
 * against 5.7 KB, 2.3 ms); the encoding is on the suspending exec's path.
 */
function compress(data: Uint8Array, maxBytes = Number.POSITIVE_INFINITY): Buffer {
  try {
    return brotliCompressSync(data, {
      params: { [zlib.BROTLI_PARAM_QUALITY]: 2, [zlib.BROTLI_PARAM_SIZE_HINT]: data.byteLength },
      // Stops (and lets go of what it made) as soon as the output passes the limit.
      ...(Number.isFinite(maxBytes) ? { maxOutputLength: Math.max(1, Math.floor(maxBytes)) } : {}),
    });
  } catch (err) {
    if ((err as { code?: string }).code === "ERR_BUFFER_TOO_LARGE") throw new SnapshotTooLarge(maxBytes);
    throw err;
  }
}

/** The encoded snapshot would pass the run's maxSnapshotBytes: refused before it is all made. */
export class SnapshotTooLarge extends Error {
  constructor(readonly limitBytes: number) {
    super(`code mode snapshot is over maxSnapshotBytes (${limitBytes} bytes); the run cannot be suspended.`);
  }
}

/** target[tOff + i] ^= source[sOff + i] for i < len: 32 bits at a time when both are aligned. */
function xorInto(target: Uint8Array, tOff: number, source: Uint8Array, sOff: number, len: number): void {
  let i = 0;
  if ((target.byteOffset + tOff) % 4 === 0 && (source.byteOffset + sOff) % 4 === 0) {
    const words = len >>> 2;
    const t = new Uint32Array(target.buffer, target.byteOffset + tOff, words);
    const s = new Uint32Array(source.buffer, source.byteOffset + sOff, words);
    for (let w = 0; w < words; w++) t[w]! ^= s[w]!;
    i = words * 4;
  }
  for (; i < len; i++) target[tOff + i]! ^= source[sOff + i]!;
}

/** A page of zeros: past the base image's end, a page like this is left out of a delta. */
const ZERO_PAGE = Buffer.alloc(PAGE);

/**
 * The delta payload: a bitmap of the 4 KB pages that differ from the base image, then
 * each such page XORed with the base (pages past the base's end as they are, unless all
 * zero: the decoder zero-fills past the base). Pages equal to the base cost one bit, and
 * only changed pages reach the compressor (a VM in a grown instance, ./grown-images.ts,
 * has megabytes of zero pages past the base).
 */
function pageDelta(mem: Uint8Array, base: Uint8Array): { payload: Buffer; changedPages: number } {
  const pages = Math.ceil(mem.byteLength / PAGE);
  const bitmap = Buffer.alloc(Math.ceil(pages / 8));
  const m = Buffer.from(mem.buffer, mem.byteOffset, mem.byteLength);
  const b = Buffer.from(base.buffer, base.byteOffset, base.byteLength);
  // First pass: which pages changed (no copies), so the payload is allocated once.
  let changedPages = 0;
  let payloadBytes = bitmap.byteLength;
  for (let p = 0; p < pages; p++) {
    const off = p * PAGE;
    const end = Math.min(off + PAGE, mem.byteLength);
    const inBase = Math.max(0, Math.min(end, base.byteLength) - off);
    if (inBase === end - off ? m.compare(b, off, end, off, end) === 0 : inBase === 0 && m.compare(ZERO_PAGE, 0, end - off, off, end) === 0) continue;
    bitmap[p >> 3]! |= 1 << (p & 7);
    changedPages++;
    payloadBytes += end - off;
  }
  const payload = Buffer.allocUnsafe(payloadBytes);
  bitmap.copy(payload, 0);
  let at = bitmap.byteLength;
  for (let p = 0; p < pages; p++) {
    if ((bitmap[p >> 3]! & (1 << (p & 7))) === 0) continue;
    const off = p * PAGE;
    const end = Math.min(off + PAGE, mem.byteLength);
    const inBase = Math.max(0, Math.min(end, base.byteLength) - off);
    m.copy(payload, at, off, end);
    if (inBase > 0) xorInto(payload, at, b, off, inBase);
    at += end - off;
  }
  return { payload, changedPages };
}

/**
 * Writes the memory a page delta describes into `target` (exactly `target.byteLength`
 * bytes): the base image, zeros past its end, and each changed page XORed in. Every byte
 * of `target` is written, so it may be a reused instance's memory.
 */
function applyPageDelta(delta: Buffer, target: Uint8Array, base: Uint8Array): void {
  const memoryBytes = target.byteLength;
  const pages = Math.ceil(memoryBytes / PAGE);
  const bitmapBytes = Math.ceil(pages / 8);
  if (delta.byteLength < bitmapBytes) throw new SnapshotFormatError("snapshot delta is truncated");
  // Checked before the target is touched: a malformed delta leaves it as it was.
  let expected = bitmapBytes;
  for (let p = 0; p < pages; p++) if ((delta[p >> 3]! & (1 << (p & 7))) !== 0) expected += Math.min(PAGE, memoryBytes - p * PAGE);
  if (expected > delta.byteLength) throw new SnapshotFormatError("snapshot delta is truncated");
  if (expected !== delta.byteLength) throw new SnapshotFormatError("snapshot delta has trailing bytes");
  const inBase = Math.min(memoryBytes, base.byteLength);
  target.set(base.subarray(0, inBase));
  target.fill(0, inBase);
  let at = bitmapBytes;
  for (let p = 0; p < pages; p++) {
    if ((delta[p >> 3]! & (1 << (p & 7))) === 0) continue;
    const off = p * PAGE;
    const len = Math.min(PAGE, memoryBytes - off);
    xorInto(target, off, delta, at, len);
    at += len;
  }
}

export function encodeSnapshot(snapshot: Snapshot, base: BaseImage, guestToken = 0, maxEnvelopeBytes = Number.POSITIVE_INFINITY): EncodedSnapshot {
  for (const ext of snapshot.extensions)
    if (!KNOWN_EXTENSIONS.has(ext.name)) throw new SnapshotFormatError(`snapshots of VMs with the ${ext.name} extension are not supported`);
  const table =
    snapshot.extensions.length > 0
      ? Buffer.from(JSON.stringify(snapshot.extensions.map((e) => ({ name: e.name, memoryBase: e.memoryBase, tableBase: e.tableBase, initFn: e.initFn }))))
      : Buffer.alloc(0);
  if (table.byteLength > MAX_EXTENSION_TABLE) throw new SnapshotFormatError("the snapshot's extension table is too large");
  const mem = snapshot.memory;
  const maxPayload = maxEnvelopeBytes - HEADER_BYTES - table.byteLength;
  let delta: { payload: Buffer; changedPages: number } | undefined = pageDelta(mem, base.memory);
  const changedPages = delta.changedPages;
  let payload: Buffer;
  try {
    payload = compress(delta.payload, maxPayload);
  } catch (err) {
    throw err instanceof SnapshotTooLarge ? new SnapshotTooLarge(maxEnvelopeBytes) : err;
  }
  delta = undefined;
  let encoding = ENCODING_DELTA;
  // Mostly rewritten memory: the plain image may compress better than the delta (only worth finishing if it does).
  if (changedPages * 2 > Math.ceil(mem.byteLength / PAGE)) {
    try {
      const plain = compress(mem, payload.byteLength - 1);
      payload = plain;
      encoding = ENCODING_PLAIN;
    } catch (err) {
      if (!(err instanceof SnapshotTooLarge)) throw err;
    }
  }
  const out = Buffer.alloc(HEADER_BYTES + table.byteLength + payload.byteLength);
  out.writeUInt32LE(MAGIC, 0);
  out.writeUInt8(VERSION, 4);
  out.writeUInt8(encoding, 5);
  out.writeUInt16LE(table.byteLength, 6);
  base.fingerprint.copy(out, 8);
  out.writeUInt32LE(mem.byteLength, 40);
  out.writeUInt32LE(snapshot.stackPointer, 44);
  out.writeUInt32LE(snapshot.runtimePtr, 48);
  out.writeUInt32LE(snapshot.contextPtr, 52);
  out.writeUInt32LE(payload.byteLength, 56);
  out.writeUInt32LE(guestToken >>> 0, 60);
  table.copy(out, HEADER_BYTES);
  payload.copy(out, HEADER_BYTES + table.byteLength);
  return { envelope: out, encoding, memoryBytes: mem.byteLength, changedPages };
}

function extensionTable(bytes: Buffer): Snapshot["extensions"] {
  if (bytes.byteLength === 0) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(bytes.toString("utf8"));
  } catch {
    throw new SnapshotFormatError("snapshot extension table is malformed");
  }
  if (!Array.isArray(parsed) || parsed.length > 8) throw new SnapshotFormatError("snapshot extension table is malformed");
  return parsed.map((e: unknown) => {
    const x = e as Record<string, unknown>;
    const int = (v: unknown) => typeof v === "number" && Number.isInteger(v) && v >= 0 && v < 2 ** 32;
    if (
      !x ||
      typeof x.name !== "string" ||
      !KNOWN_EXTENSIONS.has(x.name) ||
      !int(x.memoryBase) ||
      !int(x.tableBase) ||
      typeof x.initFn !== "string" ||
      !/^[A-Za-z0-9_]{1,64}$/.test(x.initFn)
    ) {
      throw new SnapshotFormatError("snapshot extension table names an unknown or malformed extension");
    }
    return { name: x.name, memoryBase: x.memoryBase as number, tableBase: x.tableBase as number, initFn: x.initFn };
  });
}

/**
 * A snapshot whose envelope was checked and whose payload was decompressed, not yet
 * written anywhere: `writeMemory` puts its memory into a buffer of exactly
 * `memoryBytes` (a new one, or a reused instance's memory), overwriting every byte.
 */
export type OpenedSnapshot = {
  memoryBytes: number;
  stackPointer: number;
  runtimePtr: number;
  contextPtr: number;
  extensions: Snapshot["extensions"];
  guestToken: number;
  writeMemory(target: Uint8Array): void;
};

/** The engine fingerprint (the build) an envelope was made by; undefined when it is no snapshot envelope. */
export function envelopeBuild(envelope: Uint8Array): Uint8Array | undefined {
  const buf = Buffer.from(envelope.buffer, envelope.byteOffset, envelope.byteLength);
  if (buf.byteLength < HEADER_BYTES || buf.readUInt32LE(0) !== MAGIC) return undefined;
  return Uint8Array.from(buf.subarray(8, 40));
}

export function openSnapshot(envelope: Uint8Array, base: BaseImage): OpenedSnapshot {
  const buf = Buffer.from(envelope.buffer, envelope.byteOffset, envelope.byteLength);
  if (buf.byteLength < HEADER_BYTES || buf.readUInt32LE(0) !== MAGIC) throw new SnapshotFormatError("not a code mode snapshot");
  const version = buf.readUInt8(4);
  if (version !== VERSION) throw new SnapshotFormatError(`snapshot format version ${version} is not supported (this sandbox reads version ${VERSION})`);
  const encoding = buf.readUInt8(5);
  const tableBytes = buf.readUInt16LE(6);
  if ((encoding !== ENCODING_PLAIN && encoding !== ENCODING_DELTA) || tableBytes > MAX_EXTENSION_TABLE)
    throw new SnapshotFormatError("snapshot header is malformed");
  if (!buf.subarray(8, 40).equals(base.fingerprint)) {
    throw new SnapshotFormatError(OTHER_BUILD);
  }
  const memoryBytes = buf.readUInt32LE(40);
  const payloadBytes = buf.readUInt32LE(56);
  if (memoryBytes === 0 || memoryBytes % WASM_PAGE !== 0 || memoryBytes > MAX_MEMORY_BYTES) throw new SnapshotFormatError("snapshot memory size is malformed");
  if (HEADER_BYTES + tableBytes + payloadBytes !== buf.byteLength) throw new SnapshotFormatError("snapshot payload length does not match");
  const extensions = extensionTable(buf.subarray(HEADER_BYTES, HEADER_BYTES + tableBytes));
  // A delta is the bitmap plus at most every page: never larger than memory plus the bitmap.
  const maxPayload = memoryBytes + Math.ceil(memoryBytes / PAGE / 8);
  let payload: Buffer;
  try {
    payload = brotliDecompressSync(buf.subarray(HEADER_BYTES + tableBytes), { maxOutputLength: maxPayload });
  } catch (err) {
    throw new SnapshotFormatError(`snapshot payload does not decompress: ${(err as Error).message}`);
  }
  if (encoding === ENCODING_PLAIN && payload.byteLength !== memoryBytes) throw new SnapshotFormatError("snapshot payload has the wrong size");
  return {
    memoryBytes,
    stackPointer: buf.readUInt32LE(44),
    runtimePtr: buf.readUInt32LE(48),
    contextPtr: buf.readUInt32LE(52),
    extensions,
    guestToken: buf.readUInt32LE(60),
    writeMemory(target) {
      if (target.byteLength !== memoryBytes) throw new SnapshotFormatError(`snapshot memory is ${memoryBytes} bytes, the target ${target.byteLength}`);
      if (encoding === ENCODING_DELTA) applyPageDelta(payload, target, base.memory);
      else target.set(payload);
    },
  };
}

/** The whole snapshot in a new buffer (a restore into a new instance). */
export function decodeSnapshot(envelope: Uint8Array, base: BaseImage): DecodedSnapshot {
  const opened = openSnapshot(envelope, base);
  const memory = new Uint8Array(opened.memoryBytes);
  opened.writeMemory(memory);
  return {
    memory,
    stackPointer: opened.stackPointer,
    runtimePtr: opened.runtimePtr,
    contextPtr: opened.contextPtr,
    extensions: opened.extensions,
    guestToken: opened.guestToken,
  };
}

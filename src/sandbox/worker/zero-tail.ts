/**
 * Where a VM memory's trailing zeros start. An instance a run grew (./grown-images.ts)
 * has megabytes of zero pages at its end; a parked copy of it and a grown variant keep
 * only the bytes before them, and whoever writes the memory back zero-fills the rest.
 */
const CHUNK = 64 * 1024;
const ZEROS = new Uint8Array(CHUNK);

/** The index just past the last non-zero byte of `bytes` (0 when all are zero): 64 KiB at a time from the end, compared natively. */
export function nonZeroEnd(bytes: Uint8Array): number {
  const b = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let end = b.byteLength;
  while (end > 0) {
    const start = Math.max(0, end - CHUNK);
    if (b.compare(ZEROS, 0, end - start, start, end) !== 0) break;
    end = start;
  }
  while (end > 0 && b[end - 1] === 0) end--;
  return end;
}

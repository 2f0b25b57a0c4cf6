/**
 * nonZeroEnd (src/sandbox/worker/zero-tail.ts): where a memory's trailing zeros start, found
 * 64 KiB at a time from the end. Checked against a plain scan at chunk edges, inside
 * chunks, on views into larger buffers and on all-zero memory.
 */
import { describe, expect, it } from "vitest";
import { nonZeroEnd } from "../../src/sandbox/worker/zero-tail.js";

const plain = (b: Uint8Array) => {
  let end = b.byteLength;
  while (end > 0 && b[end - 1] === 0) end--;
  return end;
};

describe("nonZeroEnd", () => {
  it("agrees with a byte-by-byte scan wherever the last non-zero byte is", () => {
    const size = 1_441_792 + 3 * 65536;
    for (const at of [0, 1, 4095, 65535, 65536, 65537, 131071, 1_441_791, 1_441_792, size - 65536, size - 2, size - 1]) {
      const mem = new Uint8Array(size);
      mem[at] = 7;
      if (at > 10) mem[3] = 1;
      expect(nonZeroEnd(mem)).toBe(plain(mem));
      expect(nonZeroEnd(mem)).toBe(at + 1);
    }
    expect(nonZeroEnd(new Uint8Array(size))).toBe(0);
    expect(nonZeroEnd(new Uint8Array(0))).toBe(0);
  });

  it("looks only at the view, not the rest of its buffer", () => {
    const buf = new Uint8Array(300_000);
    buf[250_000] = 9;
    buf[10] = 1;
    expect(nonZeroEnd(buf.subarray(0, 200_000))).toBe(11);
    expect(nonZeroEnd(buf.subarray(100_000, 260_000))).toBe(150_001);
  });
});

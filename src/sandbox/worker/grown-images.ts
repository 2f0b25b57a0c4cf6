/**
 * Grown variants of a prepared image, so an instance that a run made larger than its image
 * can still be reused instead of dropped.
 *
 * WebAssembly memory cannot shrink, and an instance is reset only to an image of exactly
 * its size: without variants, every run that grew its instance (a large tool answer parsed
 * into thousands of objects) would leave an instance to drop. A variant is the image's
 * state in a memory of one of GROWN_SIZES whose extra pages the guest's allocator already
 * owns: prepared once, in a new instance restored from the image, by one `malloc` of nearly
 * the extra size and its `free` (dlmalloc keeps the freed space as its top chunk), then
 * padded with zero pages. A reset to a variant writes every byte (the prepared bytes up to
 * the last non-zero one, then zeros to the end), so the guarantee of ./warm-vms.ts holds
 * unchanged. Variants come in a few sizes only, to bound what a worker keeps
 * (docs/module-notes.md#srcsandboxworkergrown-imagests).
 */
import { guestWasi } from "./guest-clock.js";
import { QuickJS } from "quickjs-wasi";
import { nonZeroEnd } from "./zero-tail.js";

/** Variant sizes: an instance larger than the largest is dropped, as before. */
export const GROWN_SIZES: readonly number[] = [4, 8].map((mib) => mib * 1024 * 1024);
/** Left to the allocator's bookkeeping when the heap is extended (below the size). */
const SLACK_BYTES = 256 * 1024;
const WASM_PAGE = 65536;

/** The smallest variant size that holds `bytes`, above `imageBytes`; undefined if none. */
export function grownSizeFor(bytes: number, imageBytes: number): number | undefined {
  return GROWN_SIZES.find((s) => s >= bytes && s > imageBytes + SLACK_BYTES);
}

/** What a reset to a variant writes: `prefix`, then zeros up to `memoryBytes`. */
export type GrownImage = {
  memoryBytes: number;
  prefix: Uint8Array;
  stackPointer: number;
  runtimePtr: number;
  contextPtr: number;
};

type Exports = { memory: WebAssembly.Memory; malloc(n: number): number; free(p: number): void };

/**
 * Prepares the variant of `image` at `size` bytes in a new instance (disposed after).
 * Undefined when this quickjs-wasi does not export the allocator or the heap cannot be
 * extended to fit.
 */
export async function prepareGrown(
  wasm: WebAssembly.Module,
  image: { memory: Uint8Array; stackPointer: number; runtimePtr: number; contextPtr: number },
  size: number,
): Promise<GrownImage | undefined> {
  const vm = await QuickJS.restore(
    { memory: image.memory, stackPointer: image.stackPointer, runtimePtr: image.runtimePtr, contextPtr: image.contextPtr, extensions: [] },
    { wasm, wasi: guestWasi },
  );
  try {
    const e = (vm as unknown as { exports: Partial<Exports> }).exports;
    if (!e.memory || typeof e.malloc !== "function" || typeof e.free !== "function") return undefined;
    const extra = size - e.memory.buffer.byteLength - SLACK_BYTES;
    if (extra <= 0) return undefined;
    const p = e.malloc(extra);
    if (p === 0) return undefined;
    e.free(p);
    const now = e.memory.buffer.byteLength;
    if (now > size) return undefined;
    if (now < size) e.memory.grow((size - now) / WASM_PAGE);
    const snap = vm.snapshot();
    return {
      memoryBytes: size,
      prefix: snap.memory.slice(0, nonZeroEnd(snap.memory)),
      stackPointer: snap.stackPointer,
      runtimePtr: snap.runtimePtr,
      contextPtr: snap.contextPtr,
    };
  } finally {
    vm.dispose();
  }
}

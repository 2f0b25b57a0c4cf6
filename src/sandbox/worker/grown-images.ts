/**
 * Grown variants of a prepared image, so an instance that a run made larger than its
 * image can still be reused instead of dropped.
 *
 * WebAssembly memory cannot shrink. A run that needs more heap than the image has (a
 * 0.7 MB tool answer parsed into 5,000 objects, say) grows its instance, and an instance
 * is reset only to an image of exactly its size. Before this, every such run left an
 * instance that was dropped, and the next exec instantiated a new one: about 2 ms, plus
 * the garbage collection of the old instance's memory, on the worker thread.
 *
 * A grown variant is the image's state in a memory of a fixed larger size whose extra
 * pages the guest's allocator already owns: the variant is prepared once, in a new
 * instance restored from the image, by one `malloc` of nearly the extra size and its
 * `free` (wasi-libc's dlmalloc keeps the freed space as its top chunk; it cannot give
 * memory back), then padded with zero pages to the size. The next run in a reset instance
 * allocates from that free space instead of growing the memory again. Checked: 30
 * alternating runs of 20,000 rows each in a 16 MiB variant left the memory at 16 MiB.
 *
 * A reset to a variant writes every byte: the prepared bytes up to the last non-zero one,
 * then zeros to the end (memory stays at exactly the variant's size), so the guarantee
 * of ./warm-vms.ts holds unchanged. Variants come in a few sizes only, to bound what a
 * worker keeps (a reset zero-fills the rest of a variant, and a parked copy of an idle VM
 * is as large as its memory's non-zero part: 16 MiB variants cost the hostile-mix soak
 * more than they saved).
 */
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
    { wasm },
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

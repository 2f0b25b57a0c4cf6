/**
 * The bytes a QuickJS runtime has allocated, read in constant time, and a way to measure
 * what one step allocated.
 *
 * quickjs-wasi's `getMemoryUsage()` walks every object, so its cost grows with the heap.
 * The runtime keeps the running total itself: quickjs-ng's JSRuntime starts with its five
 * allocator function pointers, then JSMallocState's `malloc_count` and `malloc_size`, so on
 * wasm32 the total is the 32-bit word at the runtime's address + 24. That layout is
 * quickjs-ng's, not an API: each thread checks it once against `getMemoryUsage()`, before
 * and after an allocation, and when it does not match, `allocatedBy` measures nothing (its
 * callers then take the cautious path).
 */
import type { QuickJS } from "quickjs-wasi";

const MALLOC_SIZE_OFFSET = 24;

type HeapExports = { memory: WebAssembly.Memory; qjs_get_runtime_ptr(): number };

function exportsOf(vm: QuickJS): HeapExports | undefined {
  const e = vm._getExports() as unknown as Partial<HeapExports>;
  return e.memory && typeof e.qjs_get_runtime_ptr === "function" ? (e as HeapExports) : undefined;
}

function read(e: HeapExports): number {
  return new DataView(e.memory.buffer).getUint32(e.qjs_get_runtime_ptr() + MALLOC_SIZE_OFFSET, true);
}

/** Whether the word read matches the runtime's own figure on this thread (checked once). */
let layoutHolds: boolean | undefined;

/** True or false once known; undefined when the check itself failed (a VM out of memory, say): it runs again next time. */
function check(vm: QuickJS, e: HeapExports): boolean | undefined {
  try {
    const before = read(e);
    if (before !== vm.getMemoryUsage().mallocSize) return false;
    const probe = vm.newString("x".repeat(4096));
    try {
      const after = read(e);
      return after > before && after === vm.getMemoryUsage().mallocSize;
    } finally {
      probe.dispose();
    }
  } catch {
    return undefined;
  }
}

/** The runtime's allocated bytes now, or undefined when this quickjs-wasi's layout is not the one known. */
export function allocatedBytes(vm: QuickJS): number | undefined {
  const e = exportsOf(vm);
  if (!e) return undefined;
  layoutHolds ??= check(vm, e);
  return layoutHolds ? read(e) : undefined;
}

/**
 * Runs `step` with the cycle collector held off (a collection in the middle would free
 * unrelated garbage and hide what the step allocated) and returns its result with the
 * bytes it left allocated; `bytes` is undefined when they cannot be read.
 */
export function allocatedBy<T>(vm: QuickJS, step: () => T): { result: T; bytes: number | undefined } {
  const before = allocatedBytes(vm);
  if (before === undefined) return { result: step(), bytes: undefined };
  const threshold = vm.gcThreshold;
  vm.gcThreshold = 0xffffffff;
  // A throw (a trap) leaves the instance to be discarded: nothing more is called in it.
  const result = step();
  const bytes = allocatedBytes(vm)! - before;
  vm.gcThreshold = threshold;
  return { result, bytes };
}

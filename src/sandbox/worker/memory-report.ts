/**
 * What a worker thread holds in memory, reported with task outcomes (at most once per
 * EVERY_MS per thread) so the pool can publish it (`codemode_worker_memory_bytes`). The
 * sidecar's RSS is its main thread's heap plus each worker's: without this, growth in the
 * workers could not be told from the C allocator's.
 */
import { getHeapStatistics } from "node:v8";
import type { WorkerMemory } from "../pool/task-protocol.js";
import { compilerMemoryBytes } from "./compiler.js";
import type { WarmVms } from "./warm-vms.js";

const EVERY_MS = 1_000;
let last = 0;

/** This thread's memory, or undefined when it was reported less than a second ago. */
export function memoryReport(warm: WarmVms | undefined): WorkerMemory | undefined {
  const now = Date.now();
  if (now - last < EVERY_MS) return undefined;
  last = now;
  const heap = getHeapStatistics();
  const kept = warm?.keptBytes() ?? { spares: 0, images: 0 };
  return {
    heapUsed: heap.used_heap_size,
    heapTotal: heap.total_heap_size,
    external: heap.external_memory,
    spares: kept.spares,
    images: kept.images,
    compiler: compilerMemoryBytes(),
  };
}

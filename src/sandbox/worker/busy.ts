/**
 * Publishes, in memory shared with the pool, since when a VM has held this worker's
 * thread (0 while none runs): the pool sends new tasks to other threads while one guest
 * computes here for longer than a slice (../pool/lanes.ts). A session takes the thread when its
 * VM runs and releases it when it waits for the host or ends; what it held in all is its
 * CPU time, charged to its session's share of the pool (../pool/cpu-budget.ts).
 */
import { workerData } from "node:worker_threads";

const data = workerData as { busy?: SharedArrayBuffer; epoch?: number } | undefined;
const busy = data?.busy ? new Int32Array(data.busy) : undefined;
const epoch = data?.epoch ?? 0;

/** One session's hold on the thread. */
export class ThreadHold {
  /** Milliseconds held so far. */
  ms = 0;
  private since = 0;

  /** The pool's id of the task, published with the mark. */
  taskId = 0;

  take(): void {
    if (busy) {
      Atomics.store(busy, 1, this.taskId);
      Atomics.store(busy, 0, Date.now() - epoch + 1);
    }
    if (this.since === 0) this.since = performance.now();
  }

  release(): void {
    if (busy) Atomics.store(busy, 0, 0);
    if (this.since !== 0) this.ms += performance.now() - this.since;
    this.since = 0;
  }
}

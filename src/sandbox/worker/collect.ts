/**
 * Gives a dropped instance's memory back to the OS at once. A QuickJS instance that grew
 * (a guest that filled its 64 MiB memory limit) is too large to reset and is dropped, but
 * its WebAssembly memory is only unmapped when V8 next collects this worker's heap, which
 * a worker whose own heap barely changes may not do for many seconds: measured in a bare
 * worker, 256 MiB of dropped memories stayed resident for 9 s; after a full collection
 * they were gone within 100 ms, for 8-10 ms of this thread. Under a stream of such guests
 * the sidecar's RSS swung by up to 64 MiB per worker and its growth over time could not
 * be read. So a drop of a large instance asks for one full collection, run on the next
 * turn of the event loop (after the task's result was posted), and at most one at a time.
 *
 * `gc` is not exposed to workers by default (and `--expose-gc` is not accepted in a
 * worker's execArgv). `codemode` sets the flag for the whole process as it starts
 * (../../cli/v8-flags.ts), so its workers find `gc` on their global object. A pool
 * started some other way (a program importing the sidecar) sets the flag here at run time
 * and takes the function from a new context, as the `expose-gc` package does; that
 * changes the process's V8 flags, which only matters to code caches (none are used then:
 * workers load the modules). Guest code runs in QuickJS, never in a V8 context, so nothing
 * a guest can reach gains it.
 */
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/** Instances at least this large (the largest grown variant, ./grown-images.ts) are worth a collection when dropped. */
export const COLLECT_AFTER_DROP_BYTES = 8 * 1024 * 1024;

let gc: (() => void) | undefined;
let pending = false;

function collector(): (() => void) | undefined {
  if (gc) return gc;
  const exposed = (globalThis as { gc?: unknown }).gc;
  if (typeof exposed === "function") return (gc = exposed as () => void);
  try {
    setFlagsFromString("--expose-gc");
    gc = runInNewContext("gc") as () => void;
  } catch {
    gc = () => undefined; // no collector here: V8 collects when it will
  }
  return gc;
}

/** Asks for one full collection of this thread's heap soon (coalesced with one already asked for). */
export function collectSoon(): void {
  if (pending) return;
  pending = true;
  setTimeout(() => {
    pending = false;
    collector()?.();
  }, 0);
}

/**
 * Gives a dropped instance's memory back to the OS at once. A QuickJS instance that grew
 * past what can be reset is dropped, but its WebAssembly memory is only unmapped when V8
 * next collects this worker's heap, which a worker whose own heap barely changes may not do
 * for a long time: the sidecar's RSS would swing with such guests and its growth could not
 * be read. So a drop of an instance of COLLECT_AFTER_DROP_BYTES or more asks for one full
 * collection, run on the next turn of the event loop (after the task's result was posted),
 * at most one at a time.
 *
 * `gc` is not exposed to workers by default (`--expose-gc` is not accepted in a worker's
 * execArgv): `codemode` sets the flag for the whole process (../../cli/v8-flags.ts); a pool
 * started some other way sets it here at run time and takes `gc` from a new context
 * (docs/module-notes.md#srcsandboxworkercollectts). Guest code runs in QuickJS, never in a
 * V8 context, so nothing a guest can reach gains it.
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

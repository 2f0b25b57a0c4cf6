/**
 * The V8 flags the sandbox needs, set for the whole process before anything is compiled:
 * first thing in bin/codemode.js (./launch.ts). V8's flags are process-wide, and a code
 * cache carries a digest of the flags it was made under: a worker thread started after a
 * flag changed refuses the worker bundle's cache (../shared/bundle-runner.ts). So these
 * flags must never be set later, on first need: set here, they are the same for every
 * isolate of the process, for the training start that writes the caches, and for every
 * start that reads them (docs/module-notes.md#srccliv8-flagsts).
 */
import { setFlagsFromString } from "node:v8";

/**
 * `--expose-gc`: a worker that drops a large QuickJS instance asks for a full collection at
 * once (../sandbox/worker/collect.ts); Node does not accept the flag in a worker's execArgv.
 * Worker threads created after it see `gc` on their global object (guest code runs in
 * QuickJS and never reaches V8's globals). `--experimental-wasm-extended-const`: Node 20's
 * V8 compiles quickjs-wasi's URL extension only with it (../sandbox/worker/extensions.ts).
 */
export const PROCESS_V8_FLAGS = ["--expose-gc", "--experimental-wasm-extended-const"] as const;

/** Sets PROCESS_V8_FLAGS, before the process compiles anything else (setting a flag to the value it has changes nothing). */
export function applyProcessV8Flags(): void {
  for (const flag of PROCESS_V8_FLAGS) setFlagsFromString(flag);
}

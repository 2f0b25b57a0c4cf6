/**
 * Options every guest VM is created with: no eval, UTC, the session's clock, a QuickJS stack guard well
 * inside the WASM stack (so deep recursion is a catchable RangeError, not a trap), and
 * the run's memory limit.
 */
import { Intrinsics, MAX_STACK_SIZE, type QuickJSOptions } from "quickjs-wasi";
import { guestWasi } from "./guest-clock.js";

/** Half of the largest supported guard: room for native frames between checks. */
export const STACK_BYTES = Math.floor(MAX_STACK_SIZE / 2);

/** Everything but eval/Function-from-string. */
export const GUEST_INTRINSICS = Intrinsics.ALL & ~Intrinsics.EVAL;

export function guestVmOptions(wasm: WebAssembly.Module, memoryLimitBytes: number, interrupt: () => boolean): QuickJSOptions {
  return {
    wasm,
    memoryLimit: memoryLimitBytes,
    maxStackSize: STACK_BYTES,
    intrinsics: GUEST_INTRINSICS,
    timezoneOffset: 0,
    interruptHandler: interrupt,
    // The guest sees real UTC time, through the clock of the session that runs (./guest-clock.ts).
    wasi: guestWasi,
  };
}

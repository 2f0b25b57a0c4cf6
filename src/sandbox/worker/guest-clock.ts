/**
 * The only clock and randomness a guest VM's engine reads (WASI `clock_time_get` and
 * `random_get`, passed to every guest instance this worker makes). While a session's VM holds
 * the thread, the clock is that session's: the host's time (recorded for replay when the run
 * is recorded), or a recorded run's times when it is replayed (./replay-tape.ts). While no VM
 * runs (an instance being made, an image being prepared) it reads 0 and randomness is zeros,
 * as the base image's always did, so every image and fresh VM starts alike on every machine:
 * `performance.timeOrigin` is 0 and `performance.now()` reads epoch time, as `Date.now()` does.
 */

/** What the engine reads as "now", in epoch milliseconds. */
export type ClockSource = () => number;

let active: ClockSource | undefined;

/** The session whose VM now runs on this thread sets its clock; undefined when none runs. */
export function setGuestClock(clock: ClockSource | undefined): void {
  active = clock;
}

/** The WASI overrides for every guest instance (QuickJSOptions.wasi). */
export function guestWasi(memory: WebAssembly.Memory) {
  return {
    clock_time_get: (_clock: number, _precision: bigint, resultPtr: number) => {
      const ms = active ? active() : 0;
      new DataView(memory.buffer).setBigUint64(resultPtr, BigInt(ms) * 1_000_000n, true);
      return 0;
    },
    random_get: (ptr: number, len: number) => {
      new Uint8Array(memory.buffer, ptr, len).fill(0);
      return 0;
    },
  };
}

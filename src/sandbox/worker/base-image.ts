/**
 * The fresh-VM memory image that snapshots are stored as a delta against. It must be
 * byte-identical in every sidecar process of the same build, so the VM it is taken from
 * gets a fixed clock and fixed randomness (a real guest VM differs from it only in a few
 * seed bytes, and in what the program did). Its sha256 is the engine fingerprint every
 * snapshot carries: a sidecar restores only snapshots made against its own image.
 */
import { createHash } from "node:crypto";
import { QuickJS } from "quickjs-wasi";
import { LIMITS } from "../../shared/config.js";
import { guestVmOptions } from "./vm-options.js";

export type BaseImage = { memory: Uint8Array; fingerprint: Buffer };

let cached: Promise<BaseImage> | undefined;

function deterministicWasi(memory: WebAssembly.Memory) {
  return {
    clock_time_get: (_clock: number, _precision: bigint, resultPtr: number) => {
      new DataView(memory.buffer).setBigUint64(resultPtr, 0n, true);
      return 0;
    },
    random_get: (ptr: number, len: number) => {
      new Uint8Array(memory.buffer, ptr, len).fill(0);
      return 0;
    },
  };
}

async function build(wasm: WebAssembly.Module): Promise<BaseImage> {
  const vm = await QuickJS.create({ ...guestVmOptions(wasm, LIMITS.memoryLimitBytes.default, () => false), wasi: deterministicWasi });
  try {
    const memory = vm.snapshot().memory;
    return { memory, fingerprint: createHash("sha256").update(memory).digest() };
  } finally {
    vm.dispose();
  }
}

/** This worker's base image, built once on first use. */
export function baseImage(wasm: WebAssembly.Module): Promise<BaseImage> {
  cached ??= build(wasm).catch((err: unknown) => {
    cached = undefined;
    throw err;
  });
  return cached;
}

/**
 * The memory image that snapshots are stored as a delta against: a VM with the guest
 * prelude installed for an empty catalog, exactly as every exec starts. A suspended run
 * then differs from it only in what its catalog and program added, so a trivial run's
 * stored snapshot is small.
 *
 * The image must be byte-identical in every sidecar process of the same build, so the VM it
 * is taken from gets a fixed clock and fixed randomness, and the prelude's bytecode comes
 * from the same compiler. Its sha256 is the engine fingerprint every snapshot carries: a
 * sidecar restores only snapshots made against its own image, so a change to quickjs-wasi
 * or to the prelude can never restore into the wrong layout.
 */
import { createHash } from "node:crypto";
import { QuickJS } from "quickjs-wasi";
import { HOST_ASYNC, HOST_SYNC } from "../guest/bridge-names.js";
import { LIMITS } from "../../shared/limits.js";
import { EMPTY_BOOT_JSON } from "../pool/task-protocol.js";
import { preludeBytecode } from "./compiler.js";
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
  const bytecode = await preludeBytecode(wasm);
  const vm = await QuickJS.create({ ...guestVmOptions(wasm, LIMITS.memoryLimitBytes.default, () => false), wasi: deterministicWasi });
  try {
    const sync = vm.newFunction(HOST_SYNC, (op) => (op?.isString && op.toString() === "boot" ? vm.newString(EMPTY_BOOT_JSON) : vm.undefined));
    const asyncFn = vm.newFunction(HOST_ASYNC, () => vm.undefined);
    const prelude = vm.evalBytecode(bytecode);
    const api = vm.callFunction(prelude, vm.undefined, sync, asyncFn);
    prelude.dispose();
    const boot = api.getProp("2");
    api.dispose();
    vm.callFunction(boot, vm.undefined).dispose();
    boot.dispose();
    sync.dispose();
    asyncFn.dispose();
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

/**
 * Resetting a reused QuickJS instance (./warm-vms.ts): what an instance holds beyond its
 * linear memory, the image or state it is reset to, and the reset itself. WebAssembly state
 * is the memory, the globals and the tables; the module has one global (`__stack_pointer`)
 * and a function table only extensions change. The wrapper's private fields (host
 * callbacks, owned and cached handles, handlers) are quickjs-wasi internals: `supported()`
 * checks that they exist, and a reset clears them, so no handle of the old memory is freed
 * into the new one.
 */
import type { QuickJS } from "quickjs-wasi";
import type { GrownImage } from "./grown-images.js";
import { nonZeroEnd } from "./zero-tail.js";

/** The wrapper internals a reset touches. */
export type Internals = {
  exports: {
    memory: WebAssembly.Memory;
    __stack_pointer: { value: number };
    __indirect_function_table: { readonly length: number };
    qjs_set_runtime_and_context(rt: number, ctx: number): void;
    qjs_set_memory_limit(bytes: number): void;
    qjs_set_max_stack_size(bytes: number): void;
    qjs_set_interrupt_handler(on: number): void;
    qjs_get_runtime_ptr(): number;
    qjs_get_context_ptr(): number;
  };
  hostCallbacks: Map<string, unknown>;
  _ownedHandles: Set<unknown>;
  _activeScope: unknown;
  _global: unknown;
  _undefined: unknown;
  _null: unknown;
  _true: unknown;
  _false: unknown;
  interruptHandler: unknown;
  unhandledRejectionHandler: unknown;
  moduleNormalizeHandler: unknown;
  moduleLoadHandler: unknown;
  timezoneOffsetHandler: unknown;
  loadedExtensions: unknown[];
  disposed: boolean;
};

const WRAPPER_FIELDS = [
  "hostCallbacks",
  "_ownedHandles",
  "_activeScope",
  "_global",
  "_undefined",
  "_null",
  "_true",
  "_false",
  "interruptHandler",
  "unhandledRejectionHandler",
  "moduleNormalizeHandler",
  "moduleLoadHandler",
  "timezoneOffsetHandler",
  "loadedExtensions",
  "disposed",
] as const;
const EXPORTS = [
  "memory",
  "__stack_pointer",
  "__indirect_function_table",
  "qjs_set_runtime_and_context",
  "qjs_set_memory_limit",
  "qjs_set_max_stack_size",
  "qjs_set_interrupt_handler",
  "qjs_get_runtime_ptr",
  "qjs_get_context_ptr",
] as const;

export type PreparedImage = {
  key: string;
  memory: Uint8Array;
  stackPointer: number;
  runtimePtr: number;
  contextPtr: number;
  tableLength: number;
  /** Exported handles of the prelude's `deliver` and `run`, valid in every reset instance. */
  deliverToken: number;
  runToken: number;
};

/**
 * What an instance is reset to: a prepared image, or a suspended run's snapshot (or a
 * parked VM) written straight into the instance's memory. `write` must overwrite every
 * byte of a target exactly `memoryBytes` long.
 */
export type ResetSource = {
  memoryBytes: number;
  stackPointer: number;
  runtimePtr: number;
  contextPtr: number;
  write(target: Uint8Array): void;
};

export function internals(vm: QuickJS): Internals {
  return vm as unknown as Internals;
}

export function sizeOf(vm: QuickJS): number {
  return internals(vm).exports.memory.buffer.byteLength;
}

/** True when this quickjs-wasi exposes what a reset needs. */
export function supported(vm: QuickJS): boolean {
  const w = vm as unknown as Record<string, unknown>;
  const exp = w.exports as Record<string, unknown> | null;
  return (
    WRAPPER_FIELDS.every((f) => f in w) &&
    exp !== null &&
    EXPORTS.every((e) => exp[e] !== undefined) &&
    w.hostCallbacks instanceof Map &&
    w._ownedHandles instanceof Set
  );
}

/** Overwrites an instance's whole state with the image's; the caller checked the memory size. */
export function resetTo(vm: QuickJS, image: PreparedImage): void {
  resetFrom(vm, imageSource(image));
}

export function resetFrom(vm: QuickJS, source: ResetSource): void {
  const w = internals(vm);
  source.write(new Uint8Array(w.exports.memory.buffer));
  w.exports.__stack_pointer.value = source.stackPointer;
  w.exports.qjs_set_runtime_and_context(source.runtimePtr, source.contextPtr);
  clearHostState(vm);
}

export function imageSource(image: PreparedImage): ResetSource {
  return {
    memoryBytes: image.memory.byteLength,
    stackPointer: image.stackPointer,
    runtimePtr: image.runtimePtr,
    contextPtr: image.contextPtr,
    write: (t) => t.set(image.memory),
  };
}

export function grownSource(g: GrownImage): ResetSource {
  return {
    memoryBytes: g.memoryBytes,
    stackPointer: g.stackPointer,
    runtimePtr: g.runtimePtr,
    contextPtr: g.contextPtr,
    write: (t) => {
      t.set(g.prefix);
      t.fill(0, g.prefix.byteLength);
    },
  };
}

/**
 * The state `snapshot()` returns, with the live memory instead of a copy: for encoding a
 * suspended VM, which must not run until the view is dropped. Undefined when this
 * quickjs-wasi lacks the internals (the caller then copies with `snapshot()`).
 */
export function liveState(vm: QuickJS):
  | {
      memory: Uint8Array;
      stackPointer: number;
      runtimePtr: number;
      contextPtr: number;
      extensions: Array<{ name: string; memoryBase: number; tableBase: number; initFn: string }>;
    }
  | undefined {
  if (!supported(vm)) return undefined;
  const w = internals(vm);
  if (w.loadedExtensions.length > 0) return undefined;
  return {
    memory: new Uint8Array(w.exports.memory.buffer),
    stackPointer: w.exports.__stack_pointer.value,
    runtimePtr: w.exports.qjs_get_runtime_ptr(),
    contextPtr: w.exports.qjs_get_context_ptr(),
    extensions: [],
  };
}

/** The wrapper's host-side state: handles of the old memory are dropped, never freed into the new one. */
export function clearHostState(vm: QuickJS): void {
  const w = internals(vm);
  w.hostCallbacks.clear();
  w._ownedHandles.clear();
  w._activeScope = null;
  w._global = w._undefined = w._null = w._true = w._false = null;
  w.interruptHandler = w.unhandledRejectionHandler = w.moduleNormalizeHandler = w.moduleLoadHandler = w.timezoneOffsetHandler = null;
  w.disposed = false;
}

/** An instance's linear memory, in bytes. */
export function memoryBytes(vm: QuickJS): number {
  return sizeOf(vm);
}

/** Bytes past `offset` looked at by `usedPast`: one WebAssembly page. */
const ROOM_PROBE_BYTES = 65536;

/**
 * Whether a run on a grown instance used memory past `offset` (the image's size): the page
 * there is no longer all zeros. A grown variant is the image followed by zeros, and its
 * allocator hands out the room above the image from the bottom up, so a run that needed
 * more than an image-sized instance has written that page (a hint for ../pool/room-hints.ts,
 * not a guarantee; compared natively, as ./zero-tail.ts does).
 */
export function usedPast(vm: QuickJS, offset: number): boolean {
  const buffer = internals(vm).exports.memory.buffer;
  if (offset + ROOM_PROBE_BYTES > buffer.byteLength) return false;
  return nonZeroEnd(new Uint8Array(buffer, offset, ROOM_PROBE_BYTES)) > 0;
}

/** True when an instance may be reset to `image`: no extensions, same table, memory exactly the image's size. */
export function reusableFor(vm: QuickJS, image: PreparedImage): boolean {
  return fits(vm, image.memory.byteLength, image.tableLength);
}

export function fits(vm: QuickJS, memoryBytes: number, tableLength: number): boolean {
  const w = internals(vm);
  if (w.disposed || w.loadedExtensions.length > 0 || !w.exports) return false;
  return w.exports.memory.buffer.byteLength === memoryBytes && w.exports.__indirect_function_table.length === tableLength;
}

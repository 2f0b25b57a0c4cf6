/**
 * Reused QuickJS instances, reset to a prepared image for every exec. A worker prepares one
 * image per (prelude, boot data): the memory of a VM right after its prelude ran and booted
 * with the run's catalog. A reset overwrites the whole linear memory with the image, restores
 * the stack and runtime/context pointers, and clears the wrapper's host-side state
 * (./instance-reset.ts); nothing runs in an idle instance between resets. The same reset puts
 * a suspended run's snapshot or a parked VM into an idle instance (`acquireState`).
 *
 * The guarantee: a run must never observe anything of an earlier run on the same instance.
 * Memory is reset only at exactly the size of its target, the one global is restored, and the
 * function table only extensions change (such instances are never reused). An instance that
 * trapped or whose run failed in the host is discarded; one a run grew is reset to a grown
 * variant (./grown-images.ts) or discarded. test/integration/vm-reset.test.ts checks it
 * (docs/module-notes.md#srcsandboxworkerwarm-vmsts).
 */
import { createHash } from "node:crypto";
import { guestWasi } from "./guest-clock.js";
import { QuickJS, type JSValueHandle } from "quickjs-wasi";
import { HOST_ASYNC, HOST_SYNC } from "../guest/bridge-names.js";
import { LIMITS } from "../../shared/limits.js";
import { guestVmOptions, STACK_BYTES } from "./vm-options.js";
import { GROWN_SIZES, grownSizeFor, prepareGrown, type GrownImage } from "./grown-images.js";
import {
  clearHostState,
  fits,
  grownSource,
  imageSource,
  internals,
  resetFrom,
  sizeOf,
  supported,
  type PreparedImage,
  type ResetSource,
} from "./instance-reset.js";
import { COLLECT_AFTER_DROP_BYTES, collectSoon } from "./collect.js";

type HostFn = (op?: JSValueHandle, arg?: JSValueHandle) => JSValueHandle;

/** A prelude's image before its boot() ran, and the handle of that boot function. */
type BeforeBoot = PreparedImage & { bootToken: number };

/** Images kept per worker (each about 1.5 MB). */
const MAX_IMAGES = 8;
/** Idle instances kept per worker (images of different catalogs differ in size). */
const MAX_SPARES = 4;
/** Memory of the idle instances kept per worker: the largest go first beyond it. */
const MAX_SPARE_BYTES = 16 * 1024 * 1024;
/**
 * Idle instances larger than every image (a run grew them) kept per worker. An instance
 * never shrinks, and a grown spare serves a small image too (reset to its grown variant),
 * so without this bound a worker's instances ratcheted up to the largest variant under
 * mixed traffic and stayed there: in the hostile-mix soak RSS climbed for minutes.
 */
const MAX_GROWN_SPARES = 1;
/** Grown variants kept per worker (./grown-images.ts; each holds its image's bytes). */
const MAX_GROWN = 4;

export class WarmVms {
  private readonly images = new Map<string, PreparedImage>();
  /** Per prelude (by its bytecode's digest; a worker has at most two), its image before boot. */
  private readonly beforeBootImages = new Map<string, BeforeBoot>();
  private readonly spares: QuickJS[] = [];
  /** What each instance was last acquired for (an image or a grown variant, `of`), to reset it to again once it is idle. */
  private readonly lastUse = new WeakMap<QuickJS, { of: object; source: ResetSource }>();
  /** Idle instances already reset to this image or variant (nothing has run in them since). */
  private readonly preset = new WeakMap<QuickJS, object>();
  /** Grown variants by image key and size; null where one could not be made. */
  private readonly grown = new Map<string, GrownImage | null>();
  /** Set when this quickjs-wasi lacks the internals a reset needs. */
  disabled = false;
  private spareUsed = false;
  /** The function table's length in an instance without extensions (learnt from the first one made). */
  private pristineTable: number | undefined;
  /** Counters for the worker's own checks and the benchmarks (`created`: new instances, each to run a prelude before boot). */
  readonly stats = { prepared: 0, reused: 0, restored: 0, discarded: 0, grown: 0, created: 0 };

  constructor(private readonly wasm: WebAssembly.Module) {}

  /**
   * The image for a prelude and boot answer, prepared on first use; undefined when resets
   * are unsupported. `name` must change whenever prelude or boot data do.
   */
  async image(prelude: Uint8Array, bootJson: string, name?: string): Promise<PreparedImage | undefined> {
    if (this.disabled) return undefined;
    // `name` (surface and catalog version) identifies prelude and boot data; otherwise they are hashed.
    const key = name ?? createHash("sha256").update(prelude).update("\0").update(bootJson).digest("base64");
    const known = this.images.get(key);
    if (known) {
      // Most recently used last.
      this.images.delete(key);
      this.images.set(key, known);
      return known;
    }
    const before = await this.beforeBoot(prelude);
    if (!before) return undefined;
    // An instance reset to the prelude's image before boot, booted with this catalog, is the image.
    const answer: HostFn = (op) => (op?.isString && op.toString() === "boot" ? vm.newString(bootJson) : vm.undefined);
    const { vm } = await this.acquire(
      before,
      LIMITS.memoryLimitBytes.default,
      () => false,
      answer,
      () => vm.undefined,
    );
    let image: PreparedImage;
    try {
      const boot = vm.importHandle(before.bootToken);
      try {
        vm.callFunction(boot, vm.undefined).dispose();
      } finally {
        boot.dispose();
      }
      const snap = vm.snapshot();
      image = {
        key,
        memory: snap.memory,
        stackPointer: snap.stackPointer,
        runtimePtr: snap.runtimePtr,
        contextPtr: snap.contextPtr,
        tableLength: internals(vm).exports.__indirect_function_table.length,
        deliverToken: before.deliverToken,
        runToken: before.runToken,
      };
    } catch (err) {
      this.release(vm, false);
      throw err;
    }
    this.stats.prepared++;
    this.images.set(key, image);
    if (this.images.size > MAX_IMAGES) this.images.delete(this.images.keys().next().value!);
    this.release(vm, true);
    return image;
  }

  /**
   * The prelude's image before boot, made on first use: a new instance that ran the
   * prelude, with its `deliver`, `run` and `boot` kept as exported handles. Undefined when
   * resets are unsupported.
   */
  private async beforeBoot(prelude: Uint8Array): Promise<BeforeBoot | undefined> {
    const key = createHash("sha256").update(prelude).digest("base64");
    const known = this.beforeBootImages.get(key);
    if (known) return known;
    const vm = await QuickJS.create(guestVmOptions(this.wasm, LIMITS.memoryLimitBytes.default, () => false));
    this.stats.created++;
    if (!supported(vm)) {
      this.disabled = true;
      vm.dispose();
      return undefined;
    }
    const sync = vm.newFunction(HOST_SYNC, () => vm.undefined);
    const asyncFn = vm.newFunction(HOST_ASYNC, () => vm.undefined);
    const fn = vm.evalBytecode(prelude);
    const api = vm.callFunction(fn, vm.undefined, sync, asyncFn);
    fn.dispose();
    sync.dispose();
    asyncFn.dispose();
    // The three handles stay undisposed: their boxes hold the references the tokens name.
    const deliverToken = vm.exportHandle(api.getProp("0"));
    const runToken = vm.exportHandle(api.getProp("1"));
    const bootToken = vm.exportHandle(api.getProp("2"));
    api.dispose();
    const snap = vm.snapshot();
    this.pristineTable ??= internals(vm).exports.__indirect_function_table.length;
    const before: BeforeBoot = {
      key: `before-boot:${key}`,
      memory: snap.memory,
      stackPointer: snap.stackPointer,
      runtimePtr: snap.runtimePtr,
      contextPtr: snap.contextPtr,
      tableLength: internals(vm).exports.__indirect_function_table.length,
      deliverToken,
      runToken,
      bootToken,
    };
    this.beforeBootImages.set(key, before);
    this.release(vm, true);
    return before;
  }

  /**
   * An instance in the image's state, with the run's limits and host callbacks: a spare
   * reset to it, or a new instance restored from it.
   */
  async acquire(
    image: PreparedImage,
    memoryLimitBytes: number,
    interrupt: () => boolean,
    hostSync: HostFn,
    hostAsync: HostFn,
    roomy = false,
  ): Promise<{ vm: QuickJS; how: "reused" | "restored" }> {
    const imageBytes = image.memory.byteLength;
    // A run that asked for room (its session's recent exec grew: ../pool/room-hints.ts) takes an
    // idle grown instance, reset to the image's variant of its size. Any other run takes an
    // image-sized one, a new one if none is idle: resetting a grown instance writes all of
    // its memory (8 MiB, about 0.25 ms against 0.05 ms), and a small run would keep it grown.
    if (roomy) {
      const grownSpare = this.spares.find((s) => sizeOf(s) > imageBytes && grownSizeFor(sizeOf(s), imageBytes) !== undefined);
      const variant = grownSpare ? await this.grownVariant(image, grownSizeFor(sizeOf(grownSpare), imageBytes)!) : undefined;
      if (variant) return this.acquireFrom(grownSource(variant), image.tableLength, memoryLimitBytes, interrupt, hostSync, hostAsync, variant);
    }
    return this.acquireFrom(imageSource(image), image.tableLength, memoryLimitBytes, interrupt, hostSync, hostAsync, image);
  }

  /** The image's grown variant of `size` bytes, prepared on first use (./grown-images.ts). */
  private async grownVariant(image: PreparedImage, size: number): Promise<GrownImage | undefined> {
    const key = `${image.key}@${size}`;
    let g = this.grown.get(key);
    if (g === undefined) {
      g = (await prepareGrown(this.wasm, image, size)) ?? null;
      this.grown.set(key, g);
      if (g) this.stats.grown++;
      if (this.grown.size > MAX_GROWN) this.grown.delete(this.grown.keys().next().value!);
    }
    return g ?? undefined;
  }

  /**
   * An instance holding a suspended run's snapshot or a parked VM (no extensions): a
   * spare overwritten with it when one fits, else a new instance. Undefined when resets
   * are unsupported or no instance was made here yet (the caller restores as before).
   */
  acquireState(
    source: ResetSource,
    memoryLimitBytes: number,
    interrupt: () => boolean,
    hostSync: HostFn,
    hostAsync: HostFn,
  ): Promise<{ vm: QuickJS; how: "reused" | "restored" }> | undefined {
    if (this.disabled || this.pristineTable === undefined) return undefined;
    return this.acquireFrom(source, this.pristineTable, memoryLimitBytes, interrupt, hostSync, hostAsync);
  }

  private async acquireFrom(
    source: ResetSource,
    tableLength: number,
    memoryLimitBytes: number,
    interrupt: () => boolean,
    hostSync: HostFn,
    hostAsync: HostFn,
    of?: object,
  ): Promise<{ vm: QuickJS; how: "reused" | "restored" }> {
    let vm: QuickJS | undefined;
    this.spareUsed = false;
    // An instance already reset while idle to the image or variant `of` (by identity: an
    // image prepared again is another object), else one of the exact size,
    // else a smaller one grown to it (pages a grow adds are zero, and the source
    // overwrites them): either way every byte equals the source.
    const size = source.memoryBytes;
    let at = of === undefined ? -1 : this.spares.findIndex((s) => this.preset.get(s) === of);
    const ready = at >= 0;
    if (at < 0) at = this.spares.findIndex((s) => sizeOf(s) === size);
    if (at < 0) at = this.spares.findIndex((s) => sizeOf(s) < size);
    if (at >= 0) {
      const spare = this.spares.splice(at, 1)[0]!;
      const memory = internals(spare).exports.memory;
      if (sizeOf(spare) < size) memory.grow((size - sizeOf(spare)) / 65536);
      if (fits(spare, size, tableLength)) vm = spare;
      else this.drop(spare);
    }
    if (vm) {
      if (!ready) resetFrom(vm, source);
      this.preset.delete(vm);
      this.spareUsed = true;
      this.stats.reused++;
    } else {
      // restore() installs the memory, stack pointer and runtime itself.
      const memory = new Uint8Array(size);
      source.write(memory);
      vm = await QuickJS.restore(
        { memory, stackPointer: source.stackPointer, runtimePtr: source.runtimePtr, contextPtr: source.contextPtr, extensions: [] },
        { wasm: this.wasm, wasi: guestWasi },
      );
      clearHostState(vm);
      this.stats.restored++;
    }
    if (of === undefined) this.lastUse.delete(vm);
    else this.lastUse.set(vm, { of, source });
    const w = internals(vm);
    w.exports.qjs_set_memory_limit(memoryLimitBytes);
    w.exports.qjs_set_max_stack_size(STACK_BYTES);
    w.interruptHandler = interrupt;
    w.exports.qjs_set_interrupt_handler(1);
    vm.registerHostCallback(HOST_SYNC, hostSync);
    vm.registerHostCallback(HOST_ASYNC, hostAsync);
    return { vm, how: this.spareUsed ? "reused" : "restored" };
  }

  /**
   * Takes an instance back after its run. `healthy` is false when it trapped or its run
   * ended in a host failure: it is dropped. Others are kept for a reset, within MAX_SPARES
   * MAX_SPARE_BYTES and MAX_GROWN_SPARES (the largest go first); one larger than every image and every
   * grown variant can never be reset and is dropped.
   */
  release(vm: QuickJS, healthy: boolean): void {
    if (this.spares.includes(vm)) return;
    const w = internals(vm);
    w.interruptHandler = null;
    w.hostCallbacks.clear();
    if (!healthy || w.loadedExtensions.length > 0 || sizeOf(vm) > Math.max(this.largestImage(), GROWN_SIZES[GROWN_SIZES.length - 1]!)) {
      this.drop(vm);
      return;
    }
    this.spares.push(vm);
    const image = this.largestImage();
    let bytes = 0;
    let grown = 0;
    for (const s of this.spares) {
      bytes += sizeOf(s);
      if (sizeOf(s) > image) grown++;
    }
    while (this.spares.length > MAX_SPARES || bytes > MAX_SPARE_BYTES || grown > MAX_GROWN_SPARES) {
      // The largest goes first (a grown one, while any is kept).
      let at = 0;
      for (let i = 1; i < this.spares.length; i++) if (sizeOf(this.spares[i]!) > sizeOf(this.spares[at]!)) at = i;
      const gone = this.spares.splice(at, 1)[0]!;
      bytes -= sizeOf(gone);
      if (sizeOf(gone) > image) grown--;
      this.drop(gone);
    }
    if (this.spares.includes(vm)) setImmediate(() => this.resetIdle(vm));
  }

  /**
   * Resets an idle instance to what it last ran on, once the task that released it has
   * posted its result: the next exec for that image takes it as it is, and the reset
   * (0.05 ms for an image-sized instance, up to 0.7 ms for a grown one) is off its path.
   * Nothing runs in an idle instance, so it still equals the source byte for byte when taken.
   * An instance whose size changed (a run grew it) is left for the reset at acquire.
   */
  private resetIdle(vm: QuickJS): void {
    const use = this.lastUse.get(vm);
    if (!use || !this.spares.includes(vm) || this.preset.get(vm) === use.of || sizeOf(vm) !== use.source.memoryBytes) return;
    resetFrom(vm, use.source);
    this.preset.set(vm, use.of);
  }

  private drop(vm: QuickJS): void {
    this.stats.discarded++;
    let large = false;
    try {
      large = sizeOf(vm) >= COLLECT_AFTER_DROP_BYTES;
    } catch {
      // no memory to measure: nothing large to give back
    }
    try {
      vm.dispose();
    } catch {
      // a trapped instance is dropped either way
    }
    if (large) collectSoon();
  }

  /** Bytes kept for reuse: idle instances' memories, and images with their grown variants' bytes. */
  keptBytes(): { spares: number; images: number } {
    let spares = 0;
    let images = 0;
    for (const s of this.spares) spares += sizeOf(s);
    for (const img of this.images.values()) images += img.memory.byteLength;
    for (const img of this.beforeBootImages.values()) images += img.memory.byteLength;
    for (const g of this.grown.values()) images += g?.prefix.byteLength ?? 0;
    return { spares, images };
  }

  /** The largest prepared image. */
  private largestImage(): number {
    let max = 0;
    for (const img of this.images.values()) max = Math.max(max, img.memory.byteLength);
    return max;
  }
}

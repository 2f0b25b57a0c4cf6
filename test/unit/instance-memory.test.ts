/**
 * Memory a worker no longer needs leaves the process. A dropped QuickJS instance gives its
 * memory back to the OS at once (src/sandbox/worker/collect.ts): an instance a guest grew far past every image is too large to reset, so it
 * is dropped, and its WebAssembly memory is unmapped only when V8 collects the heap. In
 * process, as a worker does: grow an instance to ~160 MiB of touched pages, release it,
 * and the full collection its drop asks for comes, and the process's RSS falls by most of
 * that, without any allocation here that could make V8 collect on its own. And the worker's compiler VM (one per worker,
 * src/sandbox/worker/compiler.ts) is replaced after a program that grew it past 8 MiB.
 */
import { readFileSync } from "node:fs";
import { constants, PerformanceObserver } from "node:perf_hooks";
import type { QuickJS, JSValueHandle } from "quickjs-wasi";
import { describe, expect, it } from "vitest";
import { compileScript, compilerMemoryBytes, preludeBytecode } from "../../src/sandbox/worker/compiler.js";
import { WarmVms } from "../../src/sandbox/worker/warm-vms.js";
import type { PreparedImage } from "../../src/sandbox/worker/instance-reset.js";
import { EMPTY_GUEST_CATALOG } from "../../src/sandbox/pool/task-protocol.js";
import { until } from "../helpers/until.js";

const wasm = await WebAssembly.compile(readFileSync(new URL(import.meta.resolve("quickjs-wasi/quickjs.wasm"))));
const BOOT = `{"catalog":${EMPTY_GUEST_CATALOG.staticJson},"context":null}`;
const MiB = 1024 * 1024;
const rssMiB = () => process.memoryUsage.rss() / MiB;

/** Counts this heap's full (major) collections from now on. */
function fullCollections(): { readonly count: number; stop(): void } {
  let count = 0;
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries() as Array<{ detail?: { kind?: number } | null }>) if (e.detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) count++;
  });
  observer.observe({ entryTypes: ["gc"] });
  return {
    get count() {
      return count;
    },
    stop: () => observer.disconnect(),
  };
}

/** Acquires an instance, has a guest fill `mib` MiB of it, and hands it back; keeps no reference to it. */
async function growAndRelease(warm: WarmVms, image: PreparedImage, mib: number): Promise<number> {
  let current: QuickJS | undefined;
  const host = () => (_op?: JSValueHandle) => current!.undefined;
  const { vm } = await warm.acquire(image, 256 * MiB, () => false, host(), host());
  current = vm;
  const compiled = await compileScript(wasm, `(async () => { globalThis.big = new Uint8Array(${mib} * 1024 * 1024).fill(7); return 1; })`, "cell.js");
  if (!compiled.ok) throw new Error(compiled.error.message);
  const run = vm.importHandle(image.runToken);
  vm.callFunction(run, vm.undefined, vm.evalBytecode(compiled.bytecode)).dispose();
  vm.executePendingJobs();
  const grown = (vm as unknown as { exports: { memory: WebAssembly.Memory } }).exports.memory.buffer.byteLength / MiB;
  warm.release(vm, true);
  current = undefined;
  return grown;
}

describe("an instance too large to reset", () => {
  it("is given back to the OS after its release, by the full collection its drop asks for", async () => {
    const warm = new WarmVms(wasm);
    const image = (await warm.image(await preludeBytecode(wasm), BOOT))!;
    const grown = await growAndRelease(warm, image, 160);
    // The drop asked for a full collection on the next turn: watch for it from here on.
    const collected = fullCollections();
    expect(grown).toBeGreaterThan(160);
    expect(warm.stats.discarded).toBe(1);
    const held = rssMiB();
    // Nothing here allocates enough to make V8 collect on its own: the collection is the drop's.
    await until(() => collected.count > 0, "the full collection the drop asked for");
    collected.stop();
    // Its memory leaves the process as the collection frees it (polled without allocating much).
    await until(() => held - rssMiB() > 120, "the dropped instance's memory to leave the process");
  });
});

describe("the per-worker compiler VM", () => {
  it("is replaced after a program that grew its memory past 8 MiB, so one large program does not hold memory for good", async () => {
    expect((await compileScript(wasm, "1 + 1", "small.js")).ok).toBe(true);
    const small = compilerMemoryBytes();
    expect(small).toBeGreaterThan(0);
    expect(small).toBeLessThanOrEqual(8 * MiB);
    // A program near the 1 MiB input limit: its literal and bytecode grow the compiler's memory.
    const big = await compileScript(wasm, `(() => ${JSON.stringify("q".repeat(1_040_000))}.length)`, "big.js");
    expect(big.ok).toBe(true);
    expect(compilerMemoryBytes()).toBeLessThanOrEqual(8 * MiB);
    // The next compile works (in a new compiler VM).
    expect((await compileScript(wasm, "2 + 2", "after.js")).ok).toBe(true);
    expect(compilerMemoryBytes()).toBeGreaterThan(0);
  });
});

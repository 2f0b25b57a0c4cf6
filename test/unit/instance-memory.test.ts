/**
 * Memory a worker no longer needs leaves the process. A dropped QuickJS instance gives its
 * memory back to the OS at once (src/sandbox/worker/collect.ts): an instance a guest grew far past every image is too large to reset, so it
 * is dropped, and its WebAssembly memory is unmapped only when V8 collects the heap. In
 * process, as a worker does: grow an instance to ~160 MiB of touched pages, release it,
 * and the process's RSS falls by most of that within a second, without any allocation
 * here that could make V8 collect on its own. And the worker's compiler VM (one per worker,
 * src/sandbox/worker/compiler.ts) is replaced after a program that grew it past 8 MiB.
 */
import { readFileSync } from "node:fs";
import type { QuickJS, JSValueHandle } from "quickjs-wasi";
import { describe, expect, it } from "vitest";
import { compileScript, compilerMemoryBytes, preludeBytecode } from "../../src/sandbox/worker/compiler.js";
import { WarmVms } from "../../src/sandbox/worker/warm-vms.js";
import type { PreparedImage } from "../../src/sandbox/worker/instance-reset.js";
import { EMPTY_GUEST_CATALOG } from "../../src/sandbox/pool/task-protocol.js";

const wasm = await WebAssembly.compile(readFileSync(new URL(import.meta.resolve("quickjs-wasi/quickjs.wasm"))));
const BOOT = `{"catalog":${EMPTY_GUEST_CATALOG.staticJson},"context":null}`;
const MiB = 1024 * 1024;
const rssMiB = () => process.memoryUsage.rss() / MiB;

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
  it("is given back to the OS within a second of its release", async () => {
    const warm = new WarmVms(wasm);
    const image = (await warm.image(await preludeBytecode(wasm), BOOT))!;
    const grown = await growAndRelease(warm, image, 160);
    expect(grown).toBeGreaterThan(160);
    expect(warm.stats.discarded).toBe(1);
    const held = rssMiB();
    // The drop asked for a collection on the next turn; poll without allocating much.
    let now = held;
    for (let i = 0; i < 20 && now > held - 120; i++) {
      await new Promise((r) => setTimeout(r, 50));
      now = rssMiB();
    }
    expect(held - now).toBeGreaterThan(120);
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

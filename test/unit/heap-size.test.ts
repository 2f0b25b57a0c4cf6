/**
 * What a QuickJS runtime has allocated, read from its own counter (src/sandbox/worker/heap-size.ts):
 * the same figure quickjs-wasi's `getMemoryUsage()` walks the heap for, before and after
 * allocations and frees; what a step allocated is measured with the cycle collector held off
 * and restored after, and a thrown step propagates.
 */
import { readFileSync } from "node:fs";
import { QuickJS } from "quickjs-wasi";
import { describe, expect, it } from "vitest";
import { allocatedBy, allocatedBytes } from "../../src/sandbox/worker/heap-size.js";

const wasm = await WebAssembly.compile(readFileSync(new URL(import.meta.resolve("quickjs-wasi/quickjs.wasm"))));

describe("the runtime's allocated bytes", () => {
  it("reads what getMemoryUsage() reports, as memory is allocated and freed", async () => {
    const vm = await QuickJS.create({ wasm });
    try {
      expect(allocatedBytes(vm)).toBe(vm.getMemoryUsage().mallocSize);
      vm.evalCode(`globalThis.big = Array.from({ length: 20000 }, (_, i) => ({ i, s: "row " + i })); 0`).dispose();
      const grown = allocatedBytes(vm)!;
      expect(grown).toBe(vm.getMemoryUsage().mallocSize);
      vm.evalCode(`globalThis.big = undefined; 0`).dispose();
      expect(allocatedBytes(vm)).toBe(vm.getMemoryUsage().mallocSize);
      expect(allocatedBytes(vm)!).toBeLessThan(grown - 500_000);
    } finally {
      vm.dispose();
    }
  });

  it("measures what a step allocated, with the collector held off during it and restored after", async () => {
    const vm = await QuickJS.create({ wasm });
    try {
      const threshold = vm.gcThreshold;
      let during = 0;
      const { result, bytes } = allocatedBy(vm, () => {
        during = vm.gcThreshold;
        return vm.evalCode(`globalThis.kept = JSON.parse("[" + "{},".repeat(9999) + "{}]"); kept.length`);
      });
      expect(vm.dump(result)).toBe(10_000);
      result.dispose();
      expect(during).not.toBe(threshold);
      expect(vm.gcThreshold).toBe(threshold);
      // 10,000 empty objects: tens of bytes each, far more than their 30 KB of text.
      expect(bytes!).toBeGreaterThan(400_000);
      expect(() =>
        allocatedBy(vm, () => {
          throw new Error("trap");
        }),
      ).toThrow("trap");
    } finally {
      vm.dispose();
    }
  });
});

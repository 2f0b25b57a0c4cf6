/**
 * Soak: `CODEMODE_SOAK=1 npx vitest run --project integration test/integration/vm-reset.test.ts` runs 1,000 writer/reader pairs (200 in `npm test`).
 *
 * The reset guarantee of reused VM instances (src/sandbox/worker/warm-vms.ts): a run can
 * observe nothing of an earlier run on the same instance.
 *
 * In process: after a hostile program wrote everywhere it can, a reset leaves the linear
 * memory equal to the prepared image byte for byte (at the image's exact size), the one
 * WebAssembly global and the table as they were, and the wrapper's host-side state
 * (callbacks, owned and cached handles, handlers) empty, whether the reset ran as the run
 * took the instance or while it was idle after its last run; an instance that grew its
 * memory past every variant, or trapped, is replaced, never reset.
 *
 * Through the real service on one thread: hundreds of alternating programs, writers
 * that plant a distinctive token everywhere a program can reach (globals, prototypes,
 * builtins, the symbol registry, RegExp statics, timers left armed, failures, timeouts,
 * memory exhaustion) and readers that report everything they can see; no reader ever
 * sees a token, and the sidecar's metrics show the instances were in fact reused.
 */
import { readFileSync } from "node:fs";
import type { QuickJS, JSValueHandle } from "quickjs-wasi";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileScript, preludeBytecode } from "../../src/sandbox/worker/compiler.js";
import { WarmVms } from "../../src/sandbox/worker/warm-vms.js";
import { liveState, resetTo, reusableFor, type PreparedImage } from "../../src/sandbox/worker/instance-reset.js";
import { baseImage } from "../../src/sandbox/worker/base-image.js";
import { grownSizeFor, prepareGrown } from "../../src/sandbox/worker/grown-images.js";
import { decodeSnapshot, encodeSnapshot, openSnapshot } from "../../src/sandbox/worker/snapshot-codec.js";
import { EMPTY_GUEST_CATALOG } from "../../src/sandbox/pool/task-protocol.js";
import { execute, openEmptyRun, startStack, waitFor, type Stack } from "../helpers/harness.js";

const wasm = await WebAssembly.compile(readFileSync(new URL(import.meta.resolve("quickjs-wasi/quickjs.wasm"))));
const BOOT = `{"catalog":${EMPTY_GUEST_CATALOG.staticJson},"context":null}`;

type Wrapper = {
  exports: { memory: WebAssembly.Memory; __stack_pointer: { value: number }; __indirect_function_table: { length: number } };
  hostCallbacks: Map<string, unknown>;
  _ownedHandles: Set<unknown>;
  _global: unknown;
  interruptHandler: unknown;
  disposed: boolean;
};
const inside = (vm: QuickJS) => vm as unknown as Wrapper;

describe("resetting a reused instance (in process)", () => {
  let warm: WarmVms;
  let image: PreparedImage;
  const sync = (vm: () => QuickJS) => (op?: JSValueHandle) => (op?.isString && op.toString() === "seed" ? vm().newString("[1,2,3,4]") : vm().undefined);

  beforeAll(async () => {
    warm = new WarmVms(wasm);
    image = (await warm.image(await preludeBytecode(wasm), BOOT))!;
    expect(image).toBeDefined();
  });

  /** What an expression evaluates to in the VM, as text (what a reset instance lets a program see). */
  async function probe(vm: QuickJS, expr: string): Promise<string> {
    const compiled = await compileScript(wasm, expr, "probe.js");
    if (!compiled.ok) throw new Error(compiled.error.message);
    const seen = vm.evalBytecode(compiled.bytecode);
    try {
      return seen.toString();
    } finally {
      seen.dispose();
    }
  }

  /** Runs a program's cell body in the VM through the prelude's `run`, as the worker does. */
  async function runIn(vm: QuickJS, body: string): Promise<void> {
    const compiled = await compileScript(wasm, `(async () => { ${body} })`, "cell.js");
    if (!compiled.ok) throw new Error(compiled.error.message);
    const run = vm.importHandle(image.runToken);
    const cell = vm.evalBytecode(compiled.bytecode);
    vm.callFunction(run, vm.undefined, cell).dispose();
    vm.executePendingJobs();
  }

  it("leaves memory equal to the image byte for byte, the stack pointer and table as prepared, and no host-side state", async () => {
    let current: QuickJS | undefined;
    const { vm } = await warm.acquire(
      image,
      64 << 20,
      () => false,
      sync(() => current!),
      sync(() => current!),
    );
    current = vm;
    await runIn(
      vm,
      `globalThis.planted = "tok"; Object.prototype.planted = "tok"; Array.prototype.push = function () { return "tok"; };
       JSON.parse = () => "tok"; Symbol.for("tok"); /(tok)/.exec("tok"); Math.random();
       const keep = []; for (let i = 0; i < 2000; i++) keep.push({ i, s: "tok".repeat(20) });
       globalThis.keep = keep; new Promise(() => {}); return "written";`,
    );
    // Cached singleton handles and an owned handle now exist on the host side.
    void vm.global;
    vm.newString("held");
    expect(Buffer.compare(new Uint8Array(inside(vm).exports.memory.buffer), image.memory)).not.toBe(0);
    warm.release(vm, true);
    expect(reusableFor(vm, image)).toBe(true);

    resetTo(vm, image);
    const w = inside(vm);
    expect(w.exports.memory.buffer.byteLength).toBe(image.memory.byteLength);
    expect(Buffer.compare(new Uint8Array(w.exports.memory.buffer), image.memory)).toBe(0);
    expect(w.exports.__stack_pointer.value).toBe(image.stackPointer);
    expect(w.exports.__indirect_function_table.length).toBe(image.tableLength);
    expect(w.hostCallbacks.size).toBe(0);
    expect(w._ownedHandles.size).toBe(0);
    expect(w._global).toBeNull();
    expect(w.interruptHandler).toBeNull();

    // And the program after it sees a pristine realm (the instance is still the spare).
    let next: QuickJS | undefined;
    const again = await warm.acquire(
      image,
      64 << 20,
      () => false,
      sync(() => next!),
      sync(() => next!),
    );
    next = again.vm;
    expect(again.how).toBe("reused");
    expect(again.vm).toBe(vm);
    expect(await probe(again.vm, `[typeof globalThis.planted, ({}).planted, typeof globalThis.keep, JSON.parse("1"), [].push(1)].join(",")`)).toBe(
      "undefined,,undefined,1,1",
    );
    warm.release(again.vm, true);
  });

  it("grows an instance of a smaller image to a larger image's exact size, and resets it byte for byte", async () => {
    // A catalog with many MCP servers makes a larger image than the empty one.
    const servers = Array.from({ length: 400 }, (_, i) => [
      `srv${i}`,
      `srv${i}`,
      Array.from({ length: 8 }, (_, j) => [`fn${j}`, `mcp:srv${i}:fn${j}`]),
      false,
      false,
    ]);
    const bigBoot = `{"catalog":${JSON.stringify({ mcp: servers, namespaces: [] })},"context":null}`;
    const big = (await warm.image(await preludeBytecode(wasm), bigBoot))!;
    expect(big.memory.byteLength).toBeGreaterThan(image.memory.byteLength);
    let current: QuickJS | undefined;
    // Hold the big image's own instance, so the only spare is a small one.
    const held = await warm.acquire(
      big,
      64 << 20,
      () => false,
      sync(() => current!),
      sync(() => current!),
    );
    const small = await warm.acquire(
      image,
      64 << 20,
      () => false,
      sync(() => current!),
      sync(() => current!),
    );
    warm.release(small.vm, true);
    const grown = await warm.acquire(
      big,
      64 << 20,
      () => false,
      sync(() => current!),
      sync(() => current!),
    );
    expect(grown.how).toBe("reused");
    expect(grown.vm).toBe(small.vm);
    resetTo(grown.vm, big);
    expect(inside(grown.vm).exports.memory.buffer.byteLength).toBe(big.memory.byteLength);
    expect(Buffer.compare(new Uint8Array(inside(grown.vm).exports.memory.buffer), big.memory)).toBe(0);
    warm.release(grown.vm, true);
    warm.release(held.vm, true);
  });

  it("replaces an instance that grew past every grown variant, and one that trapped, instead of resetting it", async () => {
    // Its own pool: the only idle instance is the one each step hands back.
    const warm = new WarmVms(wasm);
    const image = (await warm.image(await preludeBytecode(wasm), BOOT))!;
    let current: QuickJS | undefined;
    const first = await warm.acquire(
      image,
      256 << 20,
      () => false,
      sync(() => current!),
      sync(() => current!),
    );
    current = first.vm;
    await runIn(first.vm, `globalThis.big = new Uint8Array(32 * 1024 * 1024).fill(7); return 1;`);
    expect(inside(first.vm).exports.memory.buffer.byteLength).toBeGreaterThan(image.memory.byteLength);
    expect(reusableFor(first.vm, image)).toBe(false);
    warm.release(first.vm, true);
    expect(inside(first.vm).disposed).toBe(true);
    const second = await warm.acquire(
      image,
      64 << 20,
      () => false,
      sync(() => current!),
      sync(() => current!),
    );
    expect(second.vm).not.toBe(first.vm);
    expect(second.how).toBe("restored");

    warm.release(second.vm, false);
    const third = await warm.acquire(
      image,
      64 << 20,
      () => false,
      sync(() => current!),
      sync(() => current!),
    );
    expect(third.vm).not.toBe(second.vm);
    expect(third.how).toBe("restored");
    warm.release(third.vm, true);
  });

  it("resets an instance a run grew to the image's grown variant byte for byte for a run that asks for room, whose allocator already owns the extra pages", async () => {
    const warm = new WarmVms(wasm);
    const image = (await warm.image(await preludeBytecode(wasm), BOOT))!;
    let current: QuickJS | undefined;
    const body = `globalThis.planted = "tok"; const rows = JSON.parse(JSON.stringify(Array.from({ length: 12000 }, (_, i) => ({ id: i, s: "row" + i })))); globalThis.rows = rows; return rows.length;`;
    const first = await warm.acquire(
      image,
      64 << 20,
      () => false,
      sync(() => current!),
      sync(() => current!),
    );
    current = first.vm;
    await runIn(first.vm, body);
    const grownBytes = inside(first.vm).exports.memory.buffer.byteLength;
    const size = grownSizeFor(grownBytes, image.memory.byteLength)!;
    expect(grownBytes).toBeGreaterThan(image.memory.byteLength);
    expect(size).toBeDefined();
    warm.release(first.vm, true);

    for (let round = 0; round < 3; round++) {
      const again = await warm.acquire(
        image,
        64 << 20,
        () => false,
        sync(() => current!),
        sync(() => current!),
        true,
      );
      current = again.vm;
      expect(again.how).toBe("reused");
      expect(again.vm).toBe(first.vm);
      const mem = new Uint8Array(inside(again.vm).exports.memory.buffer);
      expect(mem.byteLength).toBe(size);
      // The image's bytes where it has them (the allocator's bookkeeping differs past its heap), zeros at the end.
      const variant = await prepareGrown(wasm, image, size);
      expect(Buffer.compare(mem.subarray(0, variant!.prefix.byteLength), variant!.prefix)).toBe(0);
      expect(mem.subarray(variant!.prefix.byteLength).every((b) => b === 0)).toBe(true);
      expect(inside(again.vm).exports.__stack_pointer.value).toBe(variant!.stackPointer);
      if (round === 0) {
        // Suspended here, its snapshot leaves the zero pages out: a few KB, not megabytes, and exact.
        const base = await baseImage(wasm);
        const enc = encodeSnapshot(liveState(again.vm)!, base, image.deliverToken);
        expect(enc.memoryBytes).toBe(size);
        expect(enc.envelope.byteLength).toBeLessThan(16 * 1024);
        // Zero pages past the base are left out: only pages differing from the base, or non-zero past it, are encoded.
        let expected = 0;
        let zeroPastBase = 0;
        for (let off = 0; off < mem.byteLength; off += 4096) {
          const page = mem.subarray(off, off + 4096);
          if (off < base.memory.byteLength) expected += Buffer.compare(page, base.memory.subarray(off, off + 4096)) === 0 ? 0 : 1;
          else if (page.some((x) => x !== 0)) expected++;
          else zeroPastBase++;
        }
        expect(zeroPastBase).toBeGreaterThan(100);
        expect(enc.changedPages).toBe(expected);
        expect(Buffer.compare(decodeSnapshot(enc.envelope, base).memory, mem)).toBe(0);
      }
      expect(await probe(again.vm, `[typeof globalThis.planted, typeof globalThis.rows].join(",")`)).toBe("undefined,undefined");
      // The same work again fits in the space the variant's allocator owns: no growth.
      await runIn(again.vm, body);
      expect(inside(again.vm).exports.memory.buffer.byteLength).toBe(size);
      warm.release(again.vm, true);
    }
    expect(warm.stats.grown).toBe(1);
  });

  it("gives a run that does not ask for room an image-sized instance, a new one when only a grown one is idle, and keeps the grown one", async () => {
    const warm = new WarmVms(wasm);
    const image = (await warm.image(await preludeBytecode(wasm), BOOT))!;
    let current: QuickJS | undefined;
    const first = await warm.acquire(
      image,
      64 << 20,
      () => false,
      sync(() => current!),
      sync(() => current!),
    );
    current = first.vm;
    await runIn(first.vm, `globalThis.rows = JSON.parse(JSON.stringify(Array.from({ length: 12000 }, (_, i) => ({ id: i, s: "row" + i })))); return 1;`);
    expect(inside(first.vm).exports.memory.buffer.byteLength).toBeGreaterThan(image.memory.byteLength);
    warm.release(first.vm, true);

    // Only the grown instance is idle: a small run gets a new image-sized one.
    const restoredBefore = warm.stats.restored;
    const small = await warm.acquire(
      image,
      64 << 20,
      () => false,
      sync(() => current!),
      sync(() => current!),
    );
    current = small.vm;
    expect(small.how).toBe("restored");
    expect(warm.stats.restored).toBe(restoredBefore + 1);
    expect(small.vm).not.toBe(first.vm);
    expect(inside(small.vm).exports.memory.buffer.byteLength).toBe(image.memory.byteLength);
    expect(Buffer.compare(new Uint8Array(inside(small.vm).exports.memory.buffer), image.memory)).toBe(0);
    warm.release(small.vm, true);

    // Both stay idle: the next small run reuses the image-sized one, a run asking for room the grown one.
    const next = await warm.acquire(
      image,
      64 << 20,
      () => false,
      sync(() => current!),
      sync(() => current!),
    );
    expect(next.vm).toBe(small.vm);
    const roomy = await warm.acquire(
      image,
      64 << 20,
      () => false,
      sync(() => current!),
      sync(() => current!),
      true,
    );
    expect(roomy.vm).toBe(first.vm);
    expect(inside(roomy.vm).exports.memory.buffer.byteLength).toBeGreaterThan(image.memory.byteLength);
    warm.release(next.vm, true);
    warm.release(roomy.vm, true);
  });

  it("overwrites a dirty spare with a suspended run's snapshot byte for byte (also grown to a larger one), and the run sees only its own state", async () => {
    const base = await baseImage(wasm);
    // Its own pool of instances, so the one spare below is the writer's.
    const warm = new WarmVms(wasm);
    const image = (await warm.image(await preludeBytecode(wasm), BOOT))!;
    // The suspended run: its own marker, and a large array that makes its memory larger than the image's.
    let owner: QuickJS | undefined;
    const made = await warm.acquire(
      image,
      256 << 20,
      () => false,
      sync(() => owner!),
      sync(() => owner!),
    );
    owner = made.vm;
    await runIn(made.vm, `globalThis.mine = "own"; globalThis.rows = Array.from({ length: 60000 }, (_, i) => ({ i })); await new Promise(() => {});`);
    const deliverToken = image.deliverToken;
    const live = liveState(made.vm)!;
    expect(live).toBeDefined();
    const copy = made.vm.snapshot();
    expect(Buffer.compare(live.memory, copy.memory)).toBe(0);
    expect([live.stackPointer, live.runtimePtr, live.contextPtr]).toEqual([copy.stackPointer, copy.runtimePtr, copy.contextPtr]);
    const envelope = encodeSnapshot(live, base, deliverToken).envelope;
    made.vm.dispose();
    const expected = decodeSnapshot(envelope, base);
    expect(expected.memory.byteLength).toBeGreaterThan(image.memory.byteLength);
    // Every byte of the target is written, whatever it held (also past the base image's end).
    const junk = new Uint8Array(expected.memory.byteLength).fill(0xaa);
    openSnapshot(envelope, base).writeMemory(junk);
    expect(Buffer.compare(junk, expected.memory)).toBe(0);

    // A spare dirtied by a writer, at the image's (smaller) size.
    let dirty: QuickJS | undefined;
    const writerVm = await warm.acquire(
      image,
      64 << 20,
      () => false,
      sync(() => dirty!),
      sync(() => dirty!),
    );
    dirty = writerVm.vm;
    await runIn(
      writerVm.vm,
      `globalThis.planted = "tok"; Object.prototype.planted = "tok"; const k = []; for (let i = 0; i < 300; i++) k.push("tok" + i); globalThis.k = k; return 1;`,
    );
    void writerVm.vm.global;
    expect(inside(writerVm.vm).exports.memory.buffer.byteLength).toBe(image.memory.byteLength);
    warm.release(writerVm.vm, true);

    {
      const opened = openSnapshot(envelope, base);
      let current: QuickJS | undefined;
      const got = await warm.acquireState(
        { ...opened, write: (t) => opened.writeMemory(t) },
        256 << 20,
        () => false,
        sync(() => current!),
        sync(() => current!),
      )!;
      current = got.vm;
      expect(got.how).toBe("reused");
      expect(got.vm).toBe(writerVm.vm);
      const w = inside(got.vm);
      expect(w.exports.memory.buffer.byteLength).toBe(expected.memory.byteLength);
      expect(Buffer.compare(new Uint8Array(w.exports.memory.buffer), expected.memory)).toBe(0);
      expect(w.exports.__stack_pointer.value).toBe(expected.stackPointer);
      expect(w.exports.__indirect_function_table.length).toBe(image.tableLength);
      expect(w._ownedHandles.size).toBe(0);
      expect(w._global).toBeNull();
      expect(await probe(got.vm, `[globalThis.mine, globalThis.rows.length, typeof globalThis.planted, ({}).planted, typeof globalThis.k].join(",")`)).toBe(
        "own,60000,undefined,,undefined",
      );
      warm.release(got.vm, true);
    }
  });

  it("refuses a malformed snapshot before it touches the instance's memory", async () => {
    const base = await baseImage(wasm);
    let current: QuickJS | undefined;
    const made = await warm.acquire(
      image,
      64 << 20,
      () => false,
      sync(() => current!),
      sync(() => current!),
    );
    current = made.vm;
    await runIn(made.vm, `globalThis.mine = "own"; await new Promise(() => {});`);
    const envelope = Buffer.from(encodeSnapshot(made.vm.snapshot(), base, image.deliverToken).envelope);
    const before = Buffer.from(new Uint8Array(inside(made.vm).exports.memory.buffer));
    // The same payload declared for a larger memory: the delta no longer matches the page count.
    envelope.writeUInt32LE(envelope.readUInt32LE(40) + 65536 * 4, 40);
    expect(() => openSnapshot(envelope, base).writeMemory(new Uint8Array(new ArrayBuffer(envelope.readUInt32LE(40))))).toThrow(/truncated|trailing/);
    expect(Buffer.compare(new Uint8Array(inside(made.vm).exports.memory.buffer), before)).toBe(0);
    warm.release(made.vm, true);
  });

  it("resets an idle instance ahead of its next run, which takes it equal to the image byte for byte", async () => {
    // A program that does not grow its instance (one that did is reset as it is next taken).
    let current: QuickJS | undefined;
    const { vm } = await warm.acquire(
      image,
      64 << 20,
      () => false,
      sync(() => current!),
      sync(() => current!),
    );
    current = vm;
    await runIn(vm, `globalThis.planted = "tok"; Object.prototype.planted = "tok"; globalThis.keep = ["tok".repeat(20)]; return "written";`);
    warm.release(vm, true);
    expect(Buffer.compare(new Uint8Array(inside(vm).exports.memory.buffer), image.memory)).not.toBe(0);
    // Once the releasing task's turn is over, the idle instance is reset to what it ran on.
    await new Promise((r) => setImmediate(r));
    const w = inside(vm);
    expect(Buffer.compare(new Uint8Array(w.exports.memory.buffer), image.memory)).toBe(0);
    expect(w.exports.__stack_pointer.value).toBe(image.stackPointer);
    expect(w.hostCallbacks.size).toBe(0);
    expect(w._ownedHandles.size).toBe(0);

    let next: QuickJS | undefined;
    const again = await warm.acquire(
      image,
      64 << 20,
      () => false,
      sync(() => next!),
      sync(() => next!),
    );
    next = again.vm;
    expect(again.vm).toBe(vm);
    expect(Buffer.compare(new Uint8Array(inside(again.vm).exports.memory.buffer), image.memory)).toBe(0);
    expect(await probe(again.vm, `[typeof globalThis.planted, ({}).planted, typeof globalThis.keep].join(",")`)).toBe("undefined,,undefined");
    warm.release(again.vm, true);
  });
});

// ---- Through the real service ----

/** A writer plants `tok` everywhere; its variant decides how it ends. */
function writer(tok: string, variant: number): string {
  const plant = `
    globalThis.planted = "${tok}"; globalThis["${tok}"] = 1;
    Object.prototype.planted = "${tok}"; Array.prototype.planted = "${tok}"; String.prototype.planted = "${tok}";
    Function.prototype.planted = "${tok}"; Promise.prototype.planted = "${tok}";
    Array.prototype.map = function () { return "${tok}"; }; JSON.stringify = () => "${tok}"; Math.max = () => "${tok}";
    Object.defineProperty(globalThis, "sticky", { value: "${tok}", writable: false, configurable: false });
    Symbol.for("${tok}"); /(${tok})/.exec("x${tok}x"); Error.prototype.toString = () => "${tok}";
    Date.prototype.planted = "${tok}"; Reflect.planted = "${tok}";
    globalThis.blob = "${tok}".repeat(1000);
    new WeakRef({ t: "${tok}" }); new FinalizationRegistry(() => { globalThis.fin = "${tok}"; }).register({}, "${tok}");
  `;
  switch (variant % 5) {
    case 0:
      return `${plant} return Math.random();`;
    case 1:
      return `${plant} throw new Error("${tok}");`;
    case 2:
      // Its own timeout: interrupted mid-loop.
      return `${plant} for (;;) {}`;
    case 3:
      // Memory exhaustion under a small limit (the instance may grow and be replaced).
      return `${plant} const a = []; for (;;) a.push("${tok}".repeat(1000) + a.length);`;
    default:
      // A timer armed and cleared, a pending promise and a microtask left behind.
      return `${plant} const t = setTimeout(() => {}, 60_000); clearTimeout(t); new Promise(() => {}); queueMicrotask(() => { globalThis.late = "${tok}"; }); return Math.random();`;
  }
}

/** Everything a reader can see, as one string to search for tokens. */
const READER = `
  const seen = [];
  for (const k of Reflect.ownKeys(globalThis)) seen.push(String(k));
  for (const o of [Object.prototype, Array.prototype, String.prototype, Function.prototype, Promise.prototype, Date.prototype, Reflect]) for (const k of Reflect.ownKeys(o)) seen.push(String(k));
  seen.push(String(({}).planted), String([].planted), String(globalThis.sticky), String(globalThis.fin), String(globalThis.late), String(globalThis.blob));
  seen.push(String([1].map((x) => x)), JSON.stringify({ a: 1 }), String(Math.max(1, 2)), String(new Error("e")));
  seen.push(typeof RegExp.$1 === "string" ? RegExp.$1 : "");
  return { seen: seen.join("|"), keys: Reflect.ownKeys(globalThis).length, random: Math.random() };
`;

describe("alternating hostile writers and readers on one reused thread", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack(["--threads", "1", "--execs-per-worker", "1", "--metrics-address", "127.0.0.1:0"]);
  });
  afterAll(async () => {
    expect(await stack.stop()).toBe(0);
  });

  it("no reader ever sees anything a writer planted", { timeout: 600_000 }, async () => {
    const scope = await openEmptyRun(stack.control, "reset");
    // A multiple of 5 (the writers cycle through five kinds); the soak runs five times as many.
    const PAIRS = process.env.CODEMODE_SOAK === "1" ? 1_000 : 200;
    const randoms = new Set<number>();
    let baselineKeys: number | undefined;
    const leaks: string[] = [];
    for (let i = 0; i < PAIRS; i++) {
      const tok = `tok${i.toString(36)}x${Math.random().toString(36).slice(2, 8)}`;
      const w = await execute(stack, { scope, code: writer(tok, i), config: { timeoutMs: i % 5 === 2 ? 50 : 5_000, memoryLimitBytes: BigInt(8 << 20) } });
      if (i % 5 === 0 || i % 5 === 4) {
        expect(w.model.status).toBe("completed");
        randoms.add(w.model.value as number);
      } else expect(w.model.status).toBe("failed");
      const r = await execute(stack, { scope, code: READER });
      expect(r.model.status).toBe("completed");
      const v = r.model.value as { seen: string; keys: number; random: number };
      if (v.seen.includes("tok")) leaks.push(`pair ${i}: ${v.seen.slice(Math.max(0, v.seen.indexOf("tok") - 80), v.seen.indexOf("tok") + 40)}`);
      baselineKeys ??= v.keys;
      expect(v.keys).toBe(baselineKeys);
      randoms.add(v.random);
    }
    expect(leaks).toEqual([]);
    // Math.random is seeded per run: 1.4 draws per pair (1,400 in the soak), no repeats.
    expect(randoms.size).toBe(PAIRS + (PAIRS / 5) * 2);

    const metrics = await (await fetch(`http://${stack.proc.ready.metrics}/metrics`)).text();
    const reused = Number(/codemode_vm_starts_total\{how="reused"\} (\d+)/.exec(metrics)?.[1] ?? 0);
    // Most runs reused an instance (those after a memory exhaustion restore a new one).
    expect(reused).toBeGreaterThan(PAIRS);
  });

  it("a resumed run, put into an instance a writer just used, sees only its own state", { timeout: 600_000 }, async () => {
    const scope = await openEmptyRun(stack.control, "reset-resume");
    const before = await vmStarts(stack);
    const ROUNDS = 150;
    const leaks: string[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      const tok = `tok${i.toString(36)}y${Math.random().toString(36).slice(2, 8)}`;
      // Suspended first, so the writer's instance is the idle one when the run resumes.
      const r = await execute(stack, {
        scope,
        code: `globalThis.mine = "own${i}"; await yield_control(); ${READER.replace("return {", "return { mine: globalThis.mine,")}`,
      });
      expect(r.model.status).toBe("waiting");
      const w = await execute(stack, { scope, code: writer(tok, i % 5 === 2 || i % 5 === 3 ? 0 : i), config: { timeoutMs: 5_000 } });
      expect(["completed", "failed"]).toContain(w.model.status);
      const done = await waitFor(stack.sandbox, { scope, runId: r.model.runId as string });
      expect(done.model.status).toBe("completed");
      const v = done.model.value as { seen: string; mine: string };
      expect(v.mine).toBe(`own${i}`);
      if (v.seen.includes("tok")) leaks.push(`round ${i}: ${v.seen.slice(Math.max(0, v.seen.indexOf("tok") - 80), v.seen.indexOf("tok") + 40)}`);
    }
    expect(leaks).toEqual([]);
    // The resumed runs were put into reused instances, not new ones.
    const after = await vmStarts(stack);
    expect(after.reused - before.reused).toBeGreaterThan(ROUNDS * 2 * 0.9);
    expect(after.snapshot - before.snapshot).toBeLessThan(ROUNDS / 10);
  });
});

async function vmStarts(stack: Stack): Promise<{ reused: number; snapshot: number }> {
  const metrics = await (await fetch(`http://${stack.proc.ready.metrics}/metrics`)).text();
  const count = (how: string) => Number(new RegExp(`codemode_vm_starts_total\\{how="${how}"\\} (\\d+)`).exec(metrics)?.[1] ?? 0);
  return { reused: count("reused"), snapshot: count("snapshot") };
}

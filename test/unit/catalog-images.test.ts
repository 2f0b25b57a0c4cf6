/**
 * A new catalog's prepared image (src/sandbox/worker/warm-vms.ts) is made by resetting an
 * idle instance to the prelude's image before boot and running only the prelude's
 * `boot` with that catalog: no new instance, and no whole prelude run, per catalog.
 *
 * What must hold: the image a program starts from shows exactly what a new VM that ran
 * the whole prelude with the same catalog shows (the same globals, MCP servers and
 * namespaces), nothing of the catalog or the program an instance held before, and a
 * boot that fails drops its instance and leaves the worker able to make images.
 */
import { readFileSync } from "node:fs";
import { QuickJS, type JSValueHandle } from "quickjs-wasi";
import { describe, expect, it } from "vitest";
import { compileScript, preludeBytecode } from "../../src/sandbox/worker/compiler.js";
import { WarmVms } from "../../src/sandbox/worker/warm-vms.js";
import type { PreparedImage } from "../../src/sandbox/worker/instance-reset.js";
import { guestVmOptions } from "../../src/sandbox/worker/vm-options.js";
import { HOST_ASYNC, HOST_SYNC } from "../../src/sandbox/guest/bridge-names.js";

const wasm = await WebAssembly.compile(readFileSync(new URL(import.meta.resolve("quickjs-wasi/quickjs.wasm"))));
const prelude = await preludeBytecode(wasm);

/** A boot answer with MCP servers (each with one function) and namespaces with data members. */
function bootOf(servers: string[], namespaces: string[]): string {
  const mcp = servers.map((s) => [s, s, [["query", `mcp:${s}:query`]], false, false]);
  const ns = namespaces.map((n) => [`ns-${n}`, n, JSON.stringify({ label: `${n} data`, lookup: { $tool: "x" } })]);
  return JSON.stringify({ catalog: { mcp, namespaces: ns }, context: null });
}

/** What a program sees of its realm: global names, MCP servers, namespaces' data, planted marks. */
const SURVEY = `JSON.stringify({
  globals: Object.getOwnPropertyNames(globalThis).sort(),
  mcp: Object.keys(MCP),
  mcpFns: Object.keys(MCP).map((k) => Object.keys(MCP[k]).join("+")),
  namespaces: Object.keys(namespaces).map((k) => [k, namespaces[k].label, typeof namespaces[k].lookup]),
  planted: [typeof globalThis.planted, ({}).planted === undefined],
})`;

async function evaluate(vm: QuickJS, expr: string): Promise<string> {
  const compiled = await compileScript(wasm, expr, "survey.js");
  if (!compiled.ok) throw new Error(compiled.error.message);
  const out = vm.evalBytecode(compiled.bytecode);
  try {
    return out.toString();
  } finally {
    out.dispose();
  }
}

const quiet = (vm: () => QuickJS) => (): JSValueHandle => vm().undefined;

/** The survey in an instance acquired from the image. */
async function surveyImage(warm: WarmVms, image: PreparedImage): Promise<string> {
  let current: QuickJS | undefined;
  const { vm } = await warm.acquire(
    image,
    64 << 20,
    () => false,
    quiet(() => current!),
    quiet(() => current!),
  );
  current = vm;
  try {
    return await evaluate(vm, SURVEY);
  } finally {
    warm.release(vm, true);
  }
}

/** The survey in a new VM that ran the whole prelude and its boot, as a run with extensions does. */
async function surveyFresh(bootJson: string): Promise<string> {
  const vm = await QuickJS.create(guestVmOptions(wasm, 64 << 20, () => false));
  try {
    const sync = vm.newFunction(HOST_SYNC, (op) => (op?.isString && op.toString() === "boot" ? vm.newString(bootJson) : vm.undefined));
    const asyncFn = vm.newFunction(HOST_ASYNC, () => vm.undefined);
    const fn = vm.evalBytecode(prelude);
    const api = vm.callFunction(fn, vm.undefined, sync, asyncFn);
    const boot = api.getProp("2");
    vm.callFunction(boot, vm.undefined).dispose();
    for (const h of [fn, api, boot, sync, asyncFn]) h.dispose();
    return await evaluate(vm, SURVEY);
  } finally {
    vm.dispose();
  }
}

describe("a new catalog's image, booted from the prelude's image before boot", () => {
  it("makes one instance for the prelude, then boots each catalog in a reset one; programs see what a whole prelude run shows", async () => {
    const warm = new WarmVms(wasm);
    const bootA = bootOf(["alpha", "beta"], ["crm"]);
    const bootB = bootOf(["gamma"], ["billing", "files"]);
    const a = (await warm.image(prelude, bootA, "code:a"))!;
    expect(warm.stats.created).toBe(1);

    // A program on A's image plants marks, and its instance goes back idle.
    let current: QuickJS | undefined;
    const held = await warm.acquire(
      a,
      64 << 20,
      () => false,
      quiet(() => current!),
      quiet(() => current!),
    );
    current = held.vm;
    await evaluate(held.vm, `globalThis.planted = "tok"; Object.prototype.planted = "tok"; 1`);
    warm.release(held.vm, true);

    const reusedBefore = warm.stats.reused;
    const b = (await warm.image(prelude, bootB, "code:b"))!;
    expect(warm.stats.created).toBe(1);
    expect(warm.stats.prepared).toBe(2);
    // B was booted in the instance A's program used, reset to the image before boot.
    expect(warm.stats.reused).toBe(reusedBefore + 1);

    const seenB = await surveyImage(warm, b);
    expect(JSON.parse(seenB)).toMatchObject({
      mcp: ["gamma"],
      mcpFns: ["query"],
      namespaces: [
        ["billing", "billing data", "function"],
        ["files", "files data", "function"],
      ],
      planted: ["undefined", true],
    });
    expect(seenB).toBe(await surveyFresh(bootB));
    expect(await surveyImage(warm, a)).toBe(await surveyFresh(bootA));
  });

  it("drops the instance of a boot that fails, and goes on making images", async () => {
    const warm = new WarmVms(wasm);
    await warm.image(prelude, bootOf([], []), "code:empty");
    const discarded = warm.stats.discarded;
    await expect(warm.image(prelude, "{not json", "code:broken")).rejects.toMatchObject({ name: "SyntaxError", message: expect.stringMatching(/JSON/) });
    expect(warm.stats.discarded).toBe(discarded + 1);
    const ok = (await warm.image(prelude, bootOf(["delta"], []), "code:delta"))!;
    expect(JSON.parse(await surveyImage(warm, ok)).mcp).toEqual(["delta"]);
  });
});

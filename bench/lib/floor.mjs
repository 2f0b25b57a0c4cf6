// The in-process floor: a fresh quickjs-wasi VM per program, created from a precompiled
// WebAssembly.Module, run and disposed, with the bench's tools as host functions.
//
// Tool shape (the fastest honest one, measured against a host function returning a guest
// promise the host resolves: the same within noise, this one a little faster): one
// *synchronous* host function `__tool(name, inputJson)` that returns the gateway's answer
// as JSON text, and per tool a guest `async` wrapper that stringifies the input and
// JSON.parses the answer in the guest. So `await tools.echo(x)` keeps async semantics (the
// value arrives in a microtask), the input and the answer cross the boundary as JSON text
// like on the service, and the 5,000 rows of W5 are parsed by the guest's JSON.parse (which
// beat building them with vm.hostToHandle by 2x here). No interrupt handler, no memory
// limit, no prelude beyond the wrappers.
import { readFileSync } from "node:fs";
import { QuickJS } from "quickjs-wasi";
import { answer } from "./workloads.mjs";

export async function loadWasm() {
  return WebAssembly.compile(readFileSync(new URL(import.meta.resolve("quickjs-wasi/quickjs.wasm"))));
}

const TOOLS_PRELUDE = `globalThis.tools = {
  echo: async (input) => JSON.parse(__tool("echo", JSON.stringify(input))),
  rows: async (input) => JSON.parse(__tool("rows", JSON.stringify(input))),
};`;

/** Creates, runs and disposes one VM; resolves to the program's value (an async function body). */
export async function runFloor(wasm, code, options = {}) {
  const vm = await QuickJS.create({ wasm, ...options });
  try {
    const fn = vm.newFunction("__tool", (name, input) => vm.newString(answer(name.toString(), input.toString())));
    vm.setProp(vm.global, "__tool", fn);
    fn.dispose();
    vm.evalCode(TOOLS_PRELUDE).dispose();
    const promise = vm.evalCode(`(async () => {\n${code}\n})()`);
    vm.executePendingJobs();
    const settled = await vm.resolvePromise(promise);
    promise.dispose();
    if ("error" in settled) {
      const e = vm.dump(settled.error);
      settled.error.dispose();
      throw new Error(`floor program failed: ${JSON.stringify(e)}`);
    }
    const value = vm.dump(settled.value);
    settled.value.dispose();
    return value;
  } finally {
    vm.dispose();
  }
}

let sucraseTransform;
/** The floor of a TypeScript cell: sucrase's TypeScript transform (as the service uses), then runFloor. */
export async function runFloorTs(wasm, code) {
  sucraseTransform ??= (await import("sucrase")).transform;
  const out = sucraseTransform(`async function __cell() {\n${code}\n}`, { transforms: ["typescript"], disableESTransforms: true }).code;
  return runFloor(wasm, out.slice(out.indexOf("{") + 1, out.lastIndexOf("}")));
}

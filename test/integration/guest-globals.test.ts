/**
 * The guest's globals, pinned (issue 30, fidelity): against real processes, a program on
 * each surface lists the own property names and symbols of globalThis with the typeof of
 * each, and the test compares them with the exact lists below. Code mode is listed in a
 * fresh VM and again in a VM restored by `wait` after `yield_control`; `tool_search_code`
 * (which never suspends) and `codemode.run` through the MCP front (a fresh VM per run) in
 * fresh VMs. Each is listed once by a program that does not name `URL` and once by one that
 * does: the URL extension, and with it `URL` and `URLSearchParams`, is loaded only for
 * programs whose source names them (src/sandbox/worker/extensions.ts).
 *
 * Adding or removing a global fails this test: change the lists here and the "Globals"
 * section of docs/surfaces/<surface>.md together.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { collectStream, execute, openEmptyRun, scope as newScope, startStack, waitFor, type Stack } from "../helpers/harness.js";
import { FIXTURE, startStdioFront, type Front } from "../helpers/mcp-front.js";

type Typeofs = Record<string, string>;

/**
 * What the engine itself defines in every guest VM (quickjs-wasi with every intrinsic but
 * EVAL): the ECMAScript globals, QuickJS's `InternalError`, Annex B's `escape`/`unescape`,
 * and the web extras `atob`, `btoa`, `queueMicrotask`, `performance`, `DOMException`.
 * `eval` stays a function that throws "eval is not supported".
 */
const ENGINE: Typeofs = {
  AggregateError: "function",
  Array: "function",
  ArrayBuffer: "function",
  AsyncDisposableStack: "function",
  BigInt: "function",
  BigInt64Array: "function",
  BigUint64Array: "function",
  Boolean: "function",
  DOMException: "function",
  DataView: "function",
  Date: "function",
  DisposableStack: "function",
  Error: "function",
  EvalError: "function",
  FinalizationRegistry: "function",
  Float16Array: "function",
  Float32Array: "function",
  Float64Array: "function",
  Function: "function",
  Infinity: "number",
  Int16Array: "function",
  Int32Array: "function",
  Int8Array: "function",
  InternalError: "function",
  Iterator: "function",
  JSON: "object",
  Map: "function",
  Math: "object",
  NaN: "number",
  Number: "function",
  Object: "function",
  Promise: "function",
  Proxy: "function",
  RangeError: "function",
  ReferenceError: "function",
  Reflect: "object",
  RegExp: "function",
  Set: "function",
  SharedArrayBuffer: "function",
  String: "function",
  SuppressedError: "function",
  Symbol: "function",
  SyntaxError: "function",
  TypeError: "function",
  URIError: "function",
  Uint16Array: "function",
  Uint32Array: "function",
  Uint8Array: "function",
  Uint8ClampedArray: "function",
  WeakMap: "function",
  WeakRef: "function",
  WeakSet: "function",
  atob: "function",
  btoa: "function",
  decodeURI: "function",
  decodeURIComponent: "function",
  encodeURI: "function",
  encodeURIComponent: "function",
  escape: "function",
  eval: "function",
  globalThis: "object",
  isFinite: "function",
  isNaN: "function",
  parseFloat: "function",
  parseInt: "function",
  performance: "object",
  queueMicrotask: "function",
  undefined: "undefined",
  unescape: "function",
};

/** Code mode's prelude (src/sandbox/surfaces/code-mode/prelude.ts), with an empty catalog: no namespace globals. */
const CODE_MODE: Typeofs = {
  ALL_TOOLS: "object",
  API: "object",
  MCP: "object",
  TextDecoder: "function",
  TextEncoder: "function",
  clearInterval: "function",
  clearTimeout: "function",
  console: "object",
  json: "function",
  namespaces: "object",
  setInterval: "function",
  setTimeout: "function",
  structuredClone: "function",
  text: "function",
  tools: "object",
  yield_control: "function",
};

/** Tool Search's prelude (src/sandbox/surfaces/tool-search/prelude.ts). */
const TOOL_SEARCH: Typeofs = {
  console: "object",
  openclaw: "object",
};

/** codemode.run's prelude (src/sandbox/surfaces/mcp-run/prelude.ts), which also deletes `eval`. */
const MCP_RUN: Typeofs = {
  TextDecoder: "function",
  TextEncoder: "function",
  __codemode_result__: "undefined",
  clearTimeout: "function",
  console: "object",
  setTimeout: "function",
  structuredClone: "function",
};
const MCP_RUN_REMOVES = ["eval"];

/** quickjs-wasi's URL extension, for a program that names URL or URLSearchParams. */
const URL_EXTENSION: Typeofs = { URL: "function", URLSearchParams: "function" };

/** The only own symbol of globalThis on every surface. */
const SYMBOLS = [["Symbol(Symbol.toStringTag)", "string"]];

/** The sorted [name, typeof] pairs a listing must equal. */
function expected(parts: Typeofs[], remove: string[] = []): Array<[string, string]> {
  const all: Typeofs = {};
  for (const part of parts) {
    for (const [name, type] of Object.entries(part)) {
      expect(Object.hasOwn(all, name), `${name} is listed twice`).toBe(false);
      all[name] = type;
    }
  }
  for (const name of remove) delete all[name];
  return Object.entries(all).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/**
 * An expression that lists globalThis as the program found it (it declares nothing global);
 * with `url`, it names URL, as a program using it would.
 */
function listing(url = false): string {
  return `(() => {
    ${url ? "void URL;" : ""}
    const names = Object.getOwnPropertyNames(globalThis).sort();
    return {
      globals: names.map((n) => [n, typeof globalThis[n]]),
      symbols: Object.getOwnPropertySymbols(globalThis).map((s) => [String(s), typeof globalThis[s]]),
    };
  })()`;
}

type Listing = { globals: Array<[string, string]>; symbols: Array<[string, string]> };

let stack: Stack;
let front: Front;
beforeAll(async () => {
  [stack, front] = await Promise.all([startStack(), startStdioFront({ fixture: { command: process.execPath, args: [FIXTURE, "--name", "fixture-server"] } })]);
});
afterAll(async () => {
  await front?.close();
  expect(await stack?.stop()).toBe(0);
});

describe("guest globals", () => {
  it("code mode with sessionStore false: a fresh VM and a VM restored by wait have exactly the seed's globals", async () => {
    const scope = newScope("globals");
    await stack.control.openRun({ scope, catalog: { case: "tools", value: { tools: [] } }, config: { sessionStore: false } });
    const fresh = async (code: string): Promise<Listing> => {
      const { model } = await execute(stack, { scope, code });
      expect(model.status, JSON.stringify(model)).toBe("completed");
      return model.value as Listing;
    };
    const restored = async (code: string): Promise<Listing> => {
      const yielded = await execute(stack, { scope, code: `await yield_control("list"); ${code}` });
      expect(yielded.model, JSON.stringify(yielded.model)).toMatchObject({ status: "waiting", reason: "yield" });
      const { model } = await waitFor(stack.sandbox, { scope, runId: yielded.model.runId! });
      expect(model.status, JSON.stringify(model)).toBe("completed");
      return model.value as Listing;
    };
    const plain = expected([ENGINE, CODE_MODE]);
    const withUrl = expected([ENGINE, CODE_MODE, URL_EXTENSION]);

    // The listing sees a global the program adds, and the next VM does not have it.
    const added = await fresh(`globalThis.added = 1; return ${listing()};`);
    expect(added.globals).toEqual(expected([ENGINE, CODE_MODE, { added: "number" }]));

    for (const found of [await fresh(`return ${listing()};`), await restored(`return ${listing()};`)]) {
      expect(found.globals).toEqual(plain);
      expect(found.symbols).toEqual(SYMBOLS);
    }
    for (const found of [await fresh(`return ${listing(true)};`), await restored(`return ${listing(true)};`)]) {
      expect(found.globals).toEqual(withUrl);
      expect(found.symbols).toEqual(SYMBOLS);
    }
  });

  it("code mode by default: the seed's globals plus the session store's store and load, fresh and restored", async () => {
    const scope = await openEmptyRun(stack.control, "globals-store");
    const withStore = expected([ENGINE, CODE_MODE, { load: "function", store: "function" }]);
    const fresh = await execute(stack, { scope, code: `return ${listing()};` });
    expect((fresh.model.value as Listing).globals).toEqual(withStore);
    const yielded = await execute(stack, { scope, code: `await yield_control("list"); return ${listing()};` });
    const { model } = await waitFor(stack.sandbox, { scope, runId: yielded.model.runId! });
    expect((model.value as Listing).globals).toEqual(withStore);
  });

  it("tool_search_code: a fresh VM has exactly the listed globals", async () => {
    const scope = newScope("globals-ts");
    await stack.control.openRun({ scope, catalog: { case: "tools", value: { tools: [] } }, toolSearch: { enabled: true } });
    const fresh = async (code: string): Promise<Listing> => {
      const { model } = await collectStream(stack.sandbox.exec({ scope, code }));
      expect(model.status, JSON.stringify(model)).toBe("completed");
      return model.value as Listing;
    };

    const added = await fresh(`globalThis.added = 1; return ${listing()};`);
    expect(added.globals).toEqual(expected([ENGINE, TOOL_SEARCH, { added: "number" }]));

    const plain = await fresh(`return ${listing()};`);
    expect(plain.globals).toEqual(expected([ENGINE, TOOL_SEARCH]));
    expect(plain.symbols).toEqual(SYMBOLS);
    const withUrl = await fresh(`return ${listing(true)};`);
    expect(withUrl.globals).toEqual(expected([ENGINE, TOOL_SEARCH, URL_EXTENSION]));
    expect(withUrl.symbols).toEqual(SYMBOLS);
  });

  it("codemode.run: a run's VM has exactly the listed globals", async () => {
    const fresh = async (code: string): Promise<Listing> => {
      const r = await front.run(code);
      expect(r.diagnostics, JSON.stringify(r)).toEqual([]);
      return r.result as Listing;
    };

    const added = await fresh(`globalThis.added = 1; globalThis.__codemode_result__ = ${listing()};`);
    expect(added.globals).toEqual(expected([ENGINE, MCP_RUN, { added: "number" }], MCP_RUN_REMOVES));

    const plain = await fresh(`globalThis.__codemode_result__ = ${listing()};`);
    expect(plain.globals).toEqual(expected([ENGINE, MCP_RUN], MCP_RUN_REMOVES));
    expect(plain.symbols).toEqual(SYMBOLS);
    const withUrl = await fresh(`globalThis.__codemode_result__ = ${listing(true)};`);
    expect(withUrl.globals).toEqual(expected([ENGINE, MCP_RUN, URL_EXTENSION], MCP_RUN_REMOVES));
    expect(withUrl.symbols).toEqual(SYMBOLS);
  });
});

/**
 * JSON bytes parsed into a guest value by QuickJS's own parser (src/sandbox/worker/host-json.ts).
 *
 * In a VM made as the sandbox makes them (stack guard, memory limit): the value
 * `parseJsonBytes` gives the guest is the one its own `JSON.parse` makes of the same text,
 * key order, `__proto__` keys, numbers, escapes and every plane of Unicode included; a text
 * that does not parse (syntax, memory) is undefined, leaves no pending exception, and the VM
 * goes on working; a guest that replaced `JSON.parse` changes nothing.
 */
import { readFileSync } from "node:fs";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Intrinsics, QuickJS } from "quickjs-wasi";
import { parseJsonBytes } from "../../src/sandbox/worker/host-json.js";
import { guestVmOptions } from "../../src/sandbox/worker/vm-options.js";

const wasm = await WebAssembly.compile(readFileSync(new URL(import.meta.resolve("quickjs-wasi/quickjs.wasm"))));
const bytesOf = (text: string) => new TextEncoder().encode(text);
/** The sandbox's VM options (stack guard, memory limit), with eval so the test can drive the VM. */
const options = (memoryLimitBytes: number) => ({ ...guestVmOptions(wasm, memoryLimitBytes, () => false), intrinsics: Intrinsics.ALL });

describe("parseJsonBytes", () => {
  let vm: QuickJS;
  beforeEach(async () => {
    vm = await QuickJS.create(options(32 * 1024 * 1024));
  });
  afterEach(() => vm.dispose());

  /** What the guest sees of a value: a description no two different parses share. */
  const DESCRIBE = `(function d(v) {
    if (v === null || typeof v !== "object") return typeof v + ":" + (Object.is(v, -0) ? "-0" : String(v));
    const proto = Object.getPrototypeOf(v) === Array.prototype ? "A" : Object.getPrototypeOf(v) === Object.prototype ? "O" : "?";
    return proto + "{" + Reflect.ownKeys(v).map((k) => String(k) + "=" + (k === "length" ? v[k] : d(v[k]))).join(",") + "}";
  })`;

  function viaHost(text: string): string {
    const value = parseJsonBytes(vm, bytesOf(text));
    if (!value) return "undefined";
    const describe = vm.evalCode(DESCRIBE);
    try {
      const out = vm.callFunction(describe, vm.undefined, value);
      const s = out.toString();
      out.dispose();
      return s;
    } finally {
      describe.dispose();
      value.dispose();
    }
  }
  function viaGuest(text: string): string {
    const t = vm.newString(text);
    vm.setProp(vm.global, "__text", t);
    t.dispose();
    const out = vm.evalCode(`${DESCRIBE}(JSON.parse(globalThis.__text))`);
    const s = out.toString();
    out.dispose();
    return s;
  }

  const TEXTS = [
    `{"b":1,"a":[1,2,{"c":null}],"0":true,"__proto__":{"x":1}}`,
    `[-0, 0, 1e400, -1e-400, 12345678901234567890, 0.1, 1E2, -3.5e-7]`,
    `{"dup":1,"dup":2}`,
    `"\\u00e9\\ud83d\\ude00\\u2028 \\t\\n \\"q\\" \\\\"`,
    `{"é":"ünïcødé","日本":"語","emoji":"😀🎉","nul":"\\u0000"}`,
    ` \n\t [ ] `,
    `123`,
    `"just a string"`,
    JSON.stringify(Array.from({ length: 3_000 }, (_, i) => ({ id: i, name: `row ${i}`, amount: i * 1.25, tags: ["a", i % 2 === 0] }))),
  ];

  it("gives the guest exactly what its own JSON.parse makes of the same text", () => {
    for (const text of TEXTS) expect(viaHost(text), text.slice(0, 60)).toBe(viaGuest(text));
    expect(viaHost(TEXTS[0]!)).toContain("__proto__=O{x=number:1}");
  });

  it("ignores what the guest did to JSON.parse", () => {
    vm.evalCode(`JSON.parse = () => "replaced"; Object.defineProperty(Object.prototype, "b", { set() { throw new Error("setter ran"); } });`).dispose();
    expect(viaHost(`{"b":1}`)).toBe("O{b=number:1}");
  });

  it("is undefined for a text that does not parse, with nothing left pending, and the VM goes on", () => {
    // (Nesting past the stack guard needs the workers' 16 MB stack: test/staged-answers.test.ts.)
    const bad = [`{"a":}`, `[1,2`, "\uFEFF[1]", `{"a":1} x`, "", `{"a":"\\x"}`, "[1,]"];
    for (const text of bad) {
      expect(parseJsonBytes(vm, bytesOf(text)), JSON.stringify(text)).toBeUndefined();
      const v = vm.evalCode("1 + 1");
      expect(vm.dump(v)).toBe(2);
      v.dispose();
    }
  });

  it("is undefined when the VM's memory limit is reached, and the VM goes on", async () => {
    const small = await QuickJS.create(options(2 * 1024 * 1024));
    try {
      const huge = JSON.stringify(Array.from({ length: 40_000 }, (_, i) => ({ id: i, note: `row ${i}` })));
      expect(parseJsonBytes(small, bytesOf(huge))).toBeUndefined();
      const v = small.evalCode(`JSON.stringify({ ok: [1, 2, 3] })`);
      expect(small.dump(v)).toBe(`{"ok":[1,2,3]}`);
      v.dispose();
    } finally {
      small.dispose();
    }
  });
});

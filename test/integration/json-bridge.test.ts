/**
 * The host-side checks on JSON that crosses the bridge (src/sandbox/worker/json-bridge.ts):
 * the nesting cap is exact for arrays, objects and both mixed, counted the same at any
 * position in a wide value, and the size cap and malformed text are refused. Also through
 * the real service: a gateway answer nested past the cap is refused with INVALID_ARGUMENT
 * and the call stays pending, so a valid answer after it still reaches the program.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BridgeValueError, MAX_BRIDGE_BYTES, MAX_BRIDGE_DEPTH, nestingDepth, parseBridgeJson } from "../../src/sandbox/worker/json-bridge.js";
import { collectStream, scope as newScope, startStack, type Stack } from "../helpers/harness.js";

const nestedArrays = (depth: number) => "[".repeat(depth) + "]".repeat(depth);
const nestedObjects = (depth: number) => `${'{"a":'.repeat(depth - 1)}{}${"}".repeat(depth - 1)}`;
const mixed = (depth: number) => {
  let s = "1";
  for (let i = 0; i < depth; i++) s = i % 2 === 0 ? `[0,${s}]` : `{"k":${s},"z":null}`;
  return s;
};

describe("nesting, size and syntax caps (unit)", () => {
  it("counts depth exactly: scalars 0, the cap accepted, one past it refused, for arrays, objects and both", () => {
    expect(nestingDepth(JSON.parse("7"))).toBe(0);
    expect(nestingDepth(JSON.parse("[]"))).toBe(1);
    expect(nestingDepth(JSON.parse('{"a":[{"b":[]}]}'))).toBe(4);
    for (const make of [nestedArrays, nestedObjects, mixed]) {
      expect(nestingDepth(parseBridgeJson(make(MAX_BRIDGE_DEPTH), "v"))).toBe(MAX_BRIDGE_DEPTH);
      expect(() => parseBridgeJson(make(MAX_BRIDGE_DEPTH + 1), "v")).toThrow(new BridgeValueError(`v nests deeper than ${MAX_BRIDGE_DEPTH} levels`));
    }
  });

  it("finds the deep branch wherever it is in a wide value", () => {
    const deep = nestedArrays(MAX_BRIDGE_DEPTH);
    const rows = Array.from({ length: 5000 }, (_, i) => `{"id":${i},"tags":["a","b"]}`);
    for (const at of [0, 2500, 4999]) {
      const withDeep = rows.slice();
      withDeep[at] = `{"id":${at},"x":${deep}}`;
      expect(() => parseBridgeJson(`[${withDeep.join(",")}]`, "v")).toThrow(/nests deeper/);
    }
    expect(nestingDepth(parseBridgeJson(`[${rows.join(",")}]`, "v"))).toBe(3);
  });

  it("refuses text over the size cap before parsing, and malformed text", () => {
    expect(() => parseBridgeJson(`"${"x".repeat(MAX_BRIDGE_BYTES)}"`, "v")).toThrow(/larger than/);
    expect(() => parseBridgeJson("{", "v")).toThrow(new BridgeValueError("v is not valid JSON"));
  });
});

describe("a gateway answer nested past the cap (real service)", () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(async () => {
    expect(await stack.stop()).toBe(0);
  });

  it("is refused with INVALID_ARGUMENT, and a valid answer after it completes the call", async () => {
    const scope = newScope("depth");
    await stack.control.openRun({ scope, catalog: { case: "tools", value: { tools: [{ name: "echo", description: "echo", parametersJson: "{}" }] } } });
    const refusals: string[] = [];
    const out = await collectStream(stack.sandbox.exec({ scope, code: "const r = await tools.echo({}); return r.ok;" }), (call) => {
      void (async () => {
        try {
          await stack.sandbox.bridgeCallback({ scope, callId: call.callId, outcome: { case: "resultJson", value: nestedArrays(MAX_BRIDGE_DEPTH + 1) } });
        } catch (err) {
          refusals.push(`${(err as { code?: string }).code}: ${(err as Error).message}`);
        }
        await stack.sandbox.bridgeCallback({ scope, callId: call.callId, outcome: { case: "resultJson", value: '{"ok":true}' } });
      })();
    });
    expect(refusals).toEqual([expect.stringMatching(/invalid_argument.*nests deeper than 128 levels/)]);
    expect(out.model.status).toBe("completed");
    expect(out.model.value).toBe(true);
  });
});

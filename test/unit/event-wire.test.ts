/**
 * The sidecar's hand-written encoders for a nested call's event and an answer's response
 * (src/sandbox/exec/event-wire.ts), against protobuf-es's `toBinary(create(...))`: the same
 * bytes for every shape of ToolCallRequested (each field set or left out, empty, null,
 * ASCII, multi-byte, a lone surrogate, short and long, lengths where the varint grows, the
 * enum at its edges, keys create ignores) and for both BridgeCallbackResponses; nothing for
 * what they leave to the generated encoder (other events, created messages, values of
 * another type), so those keep their bytes too. A seeded generator covers the mixtures.
 */
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { ToolSource } from "../../src/gen/codemode/common/v1/common_pb.js";
import { BridgeCallbackResponseSchema, ExecEventSchema, ToolCallRequestedSchema } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { EVENT_ENCODERS, encodeBridgeCallbackResponse, encodeToolCallEvent } from "../../src/sandbox/exec/event-wire.js";

type Init = Record<string, unknown>;
/** Bytes as hex, so a mismatch shows where (and a Buffer compares equal to a Uint8Array). */
const hex = (b: Uint8Array | undefined) => (b === undefined ? undefined : Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString("hex"));
const generated = (value: Init) => hex(toBinary(ExecEventSchema, create(ExecEventSchema, { event: { case: "toolCall", value } } as never)));
const fastBytes = (value: Init) => encodeToolCallEvent({ event: { case: "toolCall", value } });
const fast = (value: Init) => hex(fastBytes(value));

const STRING_KEYS = ["callId", "toolId", "toolName", "sourceName", "inputJson", "parentCallId", "codeModeRunId", "traceParent", "traceState"];

const base: Init = {
  callId: "c_AbCdEfGhIjKl",
  toolId: "openclaw:core:echo",
  toolName: "echo",
  source: ToolSource.OPENCLAW,
  sourceName: "core",
  inputJson: '{"i":3}',
  parentCallId: "exec_12345678",
  codeModeRunId: "cm_abcdefabcdefabcdef",
};

/** A seeded pseudo-random generator (mulberry32), so a failure names a reproducible case. */
function rng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const PIECES = ["a", "Z", "0", "{", '"', "\\", "\n", "\u0000", "\u007f", "é", "ü", "€", "中", "😀", "\ud800", "\udc00", " "];
function randomString(next: () => number): string {
  const lengths = [0, 1, 5, 63, 64, 65, 127, 128, 200, 16_383, 16_384];
  const len = next() < 0.7 ? Math.floor(next() * 40) : lengths[Math.floor(next() * lengths.length)]!;
  const ascii = next() < 0.5;
  let s = "";
  while (s.length < len) s += ascii ? String.fromCharCode(32 + Math.floor(next() * 95)) : PIECES[Math.floor(next() * PIECES.length)]!;
  return s;
}

describe("ToolCallRequested encoded without protobuf-es", () => {
  it("gives toBinary's bytes for the event the segment sends", () => {
    expect(fast(base)).toEqual(generated(base));
    expect(fromBinary(ExecEventSchema, fastBytes(base)!).event).toEqual({ case: "toolCall", value: create(ToolCallRequestedSchema, base as never) });
  });

  it("gives toBinary's bytes with each field left out, empty or null", () => {
    for (const key of [...STRING_KEYS, "source"]) {
      for (const v of [undefined, null, key === "source" ? 0 : ""]) {
        const init = { ...base, [key]: v };
        expect(fast(init), `${key}=${String(v)}`).toEqual(generated(init));
      }
      const { [key]: _, ...without } = base;
      expect(fast(without), `without ${key}`).toEqual(generated(without));
    }
    expect(fast({})).toEqual(generated({}));
  });

  it("gives toBinary's bytes for multi-byte text, lone surrogates and long strings", () => {
    const texts = [
      "ünï €uro 😀 中文",
      "\ud800",
      "a\udc00b",
      "😀".repeat(40),
      "x".repeat(64),
      "x".repeat(65),
      "é".repeat(64),
      "y".repeat(100_000),
      "\u0000\u007f\u0080",
    ];
    for (const t of texts)
      for (const key of STRING_KEYS) expect(fast({ ...base, [key]: t }), `${key}: ${t.slice(0, 20)}`).toEqual(generated({ ...base, [key]: t }));
  });

  it("gives toBinary's bytes where a length or the whole event's length takes another varint byte", () => {
    for (const n of [126, 127, 128, 129, 16_383, 16_384, 16_385, 2 ** 21 - 1, 2 ** 21]) {
      const init = { ...base, inputJson: "x".repeat(n) };
      expect(fast(init), `${n}`).toEqual(generated(init));
    }
  });

  it("gives toBinary's bytes for every source, and ignores keys create ignores", () => {
    for (const source of [0, 1, 2, 3, 127, 128, 2 ** 31 - 1]) expect(fast({ ...base, source })).toEqual(generated({ ...base, source }));
    const extra = { ...base, notAField: "x", $other: 1 };
    expect(fast(extra)).toEqual(generated(extra));
  });

  it("gives toBinary's bytes for 2,000 random mixtures", () => {
    const next = rng(34);
    for (let i = 0; i < 2_000; i++) {
      const init: Init = {};
      for (const key of STRING_KEYS) if (next() < 0.8) init[key] = next() < 0.1 ? null : randomString(next);
      if (next() < 0.8) init.source = Math.floor(next() * 4);
      expect(fast(init), `case ${i}: ${JSON.stringify(init).slice(0, 200)}`).toEqual(generated(init));
    }
  });

  it("leaves every other shape to the generated encoder", () => {
    expect(encodeToolCallEvent({ event: { case: "output", value: { kind: { case: "text", value: "hi" } } } })).toBeUndefined();
    expect(encodeToolCallEvent({ event: { case: "result", value: {} } })).toBeUndefined();
    expect(encodeToolCallEvent({ event: { case: "answerRefused", value: { callId: "c" } } })).toBeUndefined();
    expect(encodeToolCallEvent({})).toBeUndefined();
    expect(encodeToolCallEvent(undefined)).toBeUndefined();
    expect(encodeToolCallEvent(create(ExecEventSchema, { event: { case: "toolCall", value: base as never } }))).toBeUndefined();
    expect(fastBytes(create(ToolCallRequestedSchema, base as never) as unknown as Init)).toBeUndefined();
    for (const bad of [{ source: -1 }, { source: 1.5 }, { source: 2 ** 31 }, { source: "1" }, { callId: 7 }, { inputJson: { i: 1 } }, { toolName: ["x"] }])
      expect(fast({ ...base, ...bad }), JSON.stringify(bad)).toBeUndefined();
  });
});

describe("BridgeCallbackResponse encoded without protobuf-es", () => {
  it("gives toBinary's bytes for both answers", () => {
    for (const deliveredLive of [true, false])
      expect(hex(encodeBridgeCallbackResponse({ deliveredLive }))).toEqual(
        hex(toBinary(BridgeCallbackResponseSchema, create(BridgeCallbackResponseSchema, { deliveredLive }))),
      );
  });

  it("leaves every other shape to the generated encoder", () => {
    expect(encodeBridgeCallbackResponse({})).toBeUndefined();
    expect(encodeBridgeCallbackResponse({ deliveredLive: 1 })).toBeUndefined();
    expect(encodeBridgeCallbackResponse({ deliveredLive: true, other: 1 })).toBeUndefined();
    expect(encodeBridgeCallbackResponse(create(BridgeCallbackResponseSchema, { deliveredLive: true }))).toBeUndefined();
  });

  it("is what the service uses for each response type", () => {
    expect(EVENT_ENCODERS[ExecEventSchema.typeName]).toBe(encodeToolCallEvent);
    expect(EVENT_ENCODERS[BridgeCallbackResponseSchema.typeName]).toBe(encodeBridgeCallbackResponse);
  });
});

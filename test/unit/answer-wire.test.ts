/**
 * Large answers decoded with their text left as bytes (src/sandbox/exec/answer-wire.ts).
 *
 * Against the generated decoder on the same bytes: a large plain result_json gives an equal
 * message whose text is available as its exact UTF-8 bytes (and a request copied the way
 * ExecSession fills in a scope keeps them); everything else (small, repeated, followed or
 * preceded by an error, a BOM, invalid UTF-8, truncated, unknown fields, an ExecSession
 * with another member of its oneof or a second answer, which protobuf merges) gives what
 * the generated decoder gives, errors included, and no bytes.
 */
import { create, equals, fromBinary, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { BridgeCallbackRequestSchema, ExecSessionRequestSchema, type BridgeCallbackRequest } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { answerBytes, decodeBridgeCallback, decodeExecSessionRequest, STAGE_MIN } from "../../src/sandbox/exec/answer-wire.js";

const scope = { agentId: "a", sessionId: "s", sessionKey: "k", agentRunId: "r" };
const bridge = (value: string, callId = "call-1") =>
  toBinary(BridgeCallbackRequestSchema, create(BridgeCallbackRequestSchema, { scope, callId, outcome: { case: "resultJson", value } }));
const bridgeError = () =>
  toBinary(
    BridgeCallbackRequestSchema,
    create(BridgeCallbackRequestSchema, { callId: "call-1", outcome: { case: "error", value: { name: "E", message: "failed" } } }),
  );
const cat = (...parts: Uint8Array[]) => Buffer.concat(parts);
const varint = (n: number) => {
  const out: number[] = [];
  for (; n >= 0x80; n >>>= 7) out.push((n & 0x7f) | 0x80);
  out.push(n);
  return Uint8Array.from(out);
};
/** Field 3 with `bytes` as its value: result_json of a BridgeCallbackRequest, answer of an ExecSessionRequest. */
const field3 = (bytes: Uint8Array) => cat(Uint8Array.of(0x1a), varint(bytes.length), bytes);

const LARGE = JSON.stringify({ rows: Array.from({ length: 1_500 }, (_, i) => ({ i, name: `ünï ${i} 😀` })) });
const SMALL = `{"ok":true}`;

/** The generated decoder's answer: a message or the error it throws. */
function generated(bytes: Uint8Array, schema: typeof BridgeCallbackRequestSchema | typeof ExecSessionRequestSchema = BridgeCallbackRequestSchema): unknown {
  try {
    return fromBinary(schema as typeof BridgeCallbackRequestSchema, bytes);
  } catch (err) {
    return err;
  }
}
function ours(bytes: Uint8Array): BridgeCallbackRequest | Error {
  try {
    return decodeBridgeCallback(bytes);
  } catch (err) {
    return err as Error;
  }
}

describe("decodeBridgeCallback", () => {
  it("leaves a large plain result_json as its exact UTF-8 bytes, in a message equal to the generated one", () => {
    expect(Buffer.byteLength(LARGE)).toBeGreaterThan(STAGE_MIN);
    const bytes = bridge(LARGE);
    const req = decodeBridgeCallback(bytes);
    expect(Buffer.from(answerBytes(req)!).toString("utf8")).toBe(LARGE);
    expect(equals(BridgeCallbackRequestSchema, req, fromBinary(BridgeCallbackRequestSchema, bytes))).toBe(true);
    expect(req.outcome.case === "resultJson" && req.outcome.value).toBe(LARGE);
    // ExecSession fills in a missing scope with a spread: the copy keeps the bytes.
    expect(answerBytes({ ...req, scope: undefined })).toBe(answerBytes(req));
    // Unknown fields on either side change nothing.
    const unknown = Uint8Array.of(0xf8, 0x01, 0x07); // field 31, varint 7
    const withUnknown = cat(unknown, bytes, unknown);
    const u = decodeBridgeCallback(withUnknown);
    expect(Buffer.from(answerBytes(u)!).toString("utf8")).toBe(LARGE);
    expect(equals(BridgeCallbackRequestSchema, u, fromBinary(BridgeCallbackRequestSchema, withUnknown))).toBe(true);
    expect(toBinary(BridgeCallbackRequestSchema, u)).toEqual(toBinary(BridgeCallbackRequestSchema, fromBinary(BridgeCallbackRequestSchema, withUnknown)));
  });

  it("decodes everything else exactly as the generated decoder, with no bytes kept", () => {
    const bom = field3(cat(Uint8Array.of(0xef, 0xbb, 0xbf), Buffer.from(LARGE)));
    const invalid = field3(cat(Buffer.from(LARGE), Uint8Array.of(0xff, 0xfe)));
    const cases: Record<string, Uint8Array> = {
      small: bridge(SMALL),
      "answered twice (the last wins)": cat(bridge(LARGE), bridge(LARGE.replace("rows", "swor"))),
      "a result then an error": cat(bridge(LARGE), bridgeError()),
      "an error then a result": cat(bridgeError(), bridge(LARGE)),
      "a leading byte-order mark (the generated decoder drops it)": bom,
      "invalid UTF-8": invalid,
      truncated: bridge(LARGE).subarray(0, 40_000),
      "result_json as a varint": Uint8Array.of(0x18, 0x05),
    };
    for (const [label, bytes] of Object.entries(cases)) {
      const want = generated(bytes);
      const got = ours(bytes);
      if (want instanceof Error) {
        expect(got, label).toBeInstanceOf(Error);
        expect((got as Error).message, label).toBe(want.message);
        continue;
      }
      expect(got, label).not.toBeInstanceOf(Error);
      expect(answerBytes(got as BridgeCallbackRequest), label).toBeUndefined();
      expect(equals(BridgeCallbackRequestSchema, got as BridgeCallbackRequest, want as BridgeCallbackRequest), label).toBe(true);
    }
    // The BOM case decoded, without its mark, as before.
    expect((ours(bom) as BridgeCallbackRequest).outcome.value).toBe(LARGE);
  });
});

describe("decodeExecSessionRequest", () => {
  const exec = toBinary(ExecSessionRequestSchema, create(ExecSessionRequestSchema, { message: { case: "exec", value: { scope, code: "return 1" } } }));

  it("leaves a lone large answer's text as bytes, in a message equal to the generated one", () => {
    const bytes = toBinary(
      ExecSessionRequestSchema,
      create(ExecSessionRequestSchema, { message: { case: "answer", value: { callId: "c", outcome: { case: "resultJson", value: LARGE } } } }),
    );
    const req = decodeExecSessionRequest(bytes);
    expect(req.message.case).toBe("answer");
    const answer = req.message.value as BridgeCallbackRequest;
    expect(Buffer.from(answerBytes(answer)!).toString("utf8")).toBe(LARGE);
    expect(equals(ExecSessionRequestSchema, req, fromBinary(ExecSessionRequestSchema, bytes))).toBe(true);
  });

  it("decodes a second answer (merged), another member of the oneof, or a broken one as the generated decoder", () => {
    const cases: Record<string, Uint8Array> = {
      "two answers, merged": cat(field3(bridge(LARGE, "first")), field3(bridge(SMALL, ""))),
      "an exec, then an answer": cat(exec, field3(bridge(LARGE))),
      "an answer, then an exec": cat(field3(bridge(LARGE)), exec),
      "an answer with a truncated inside": field3(bridge(LARGE).subarray(0, 40_000)),
    };
    for (const [label, bytes] of Object.entries(cases)) {
      const want = generated(bytes, ExecSessionRequestSchema);
      let got: unknown;
      try {
        got = decodeExecSessionRequest(bytes);
      } catch (err) {
        got = err;
      }
      if (want instanceof Error) {
        expect((got as Error).message, label).toBe(want.message);
        continue;
      }
      const req = got as ReturnType<typeof decodeExecSessionRequest>;
      expect(equals(ExecSessionRequestSchema, req, want as typeof req), label).toBe(true);
      if (req.message.case === "answer") expect(answerBytes(req.message.value), label).toBeUndefined();
    }
  });
});

/**
 * Large tool answers encoded straight into one buffer by the client (src/protocol/answer-encoding.ts).
 *
 * Against protobuf-es's own encoder: the same bytes for a BridgeCallbackRequest and an
 * ExecSessionRequest answer, whatever characters the text holds (a lone surrogate becomes
 * U+FFFD in both) and at the lengths where the length prefix grows a byte; the same message
 * when the message carries unknown fields (which come before the answer here); nothing for
 * small answers, errors and the other requests (the generated encoder does those). The
 * sandbox's decoder takes what it writes on its fast path. (Every test's client encodes
 * this way; test/staged-answers.test.ts sends large answers to a real sidecar with it,
 * over BridgeCallback and ExecSession.)
 */
import { create, equals, fromBinary, toBinary } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { BridgeCallbackRequestSchema, ExecSessionRequestSchema, type BridgeCallbackRequest } from "../../src/gen/codemode/sandbox/v1/sandbox_pb.js";
import { DIRECT_ANSWER_MIN, encodeBridgeCallback, encodeExecSessionRequest } from "../../src/protocol/answer-encoding.js";
import { answerBytes, decodeBridgeCallback } from "../../src/sandbox/exec/answer-wire.js";

const scope = { agentId: "a", sessionId: "s", sessionKey: "k", agentRunId: "r" };
const bridge = (value: string, callId = "call-1") => create(BridgeCallbackRequestSchema, { scope, callId, outcome: { case: "resultJson", value } });
const session = (answer: BridgeCallbackRequest) => create(ExecSessionRequestSchema, { message: { case: "answer", value: answer } });

/** A JSON text of about `chars` characters, each row holding `sample`. */
const text = (chars: number, sample = "row") => {
  const row = JSON.stringify({ note: sample });
  return `[${Array.from({ length: Math.ceil(chars / (row.length + 1)) }, () => row).join(",")}]`;
};
/** A JSON string literal of exactly `bytes` UTF-8 bytes. */
const exactBytes = (bytes: number) => `"${"x".repeat(bytes - 2)}"`;

describe("large answers encoded by the client", () => {
  const texts: Array<[string, string]> = [
    ["ASCII", text(200_000)],
    ["two-, three- and four-byte characters", text(100_000, "ünï €uro 😀 中文")],
    ["a lone surrogate", `["${"a".repeat(DIRECT_ANSWER_MIN)}\ud800", "\udc00z"]`],
    ["the shortest taken", exactBytes(DIRECT_ANSWER_MIN)],
    ["a 3-byte length prefix, at its largest", exactBytes(2 ** 21 - 1)],
    ["a 4-byte length prefix, at its smallest", exactBytes(2 ** 21)],
  ];

  it.each(texts)("writes the generated encoder's bytes: %s", (_name, value) => {
    const m = bridge(value);
    expect(Buffer.from(encodeBridgeCallback(m)!).equals(toBinary(BridgeCallbackRequestSchema, m))).toBe(true);
    const s = session(m);
    expect(Buffer.from(encodeExecSessionRequest(s)!).equals(toBinary(ExecSessionRequestSchema, s))).toBe(true);
  });

  it("keeps unknown fields: the bytes decode to the same message", () => {
    const m = bridge(text(50_000));
    m.$unknown = [{ no: 9, wireType: 0, data: Uint8Array.of(7) }];
    const s = session(m);
    s.$unknown = [{ no: 12, wireType: 0, data: Uint8Array.of(1) }];
    expect(equals(BridgeCallbackRequestSchema, fromBinary(BridgeCallbackRequestSchema, encodeBridgeCallback(m)!), m)).toBe(true);
    expect(equals(ExecSessionRequestSchema, fromBinary(ExecSessionRequestSchema, encodeExecSessionRequest(s)!), s)).toBe(true);
  });

  it("leaves small answers, errors and other requests to the generated encoder", () => {
    expect(encodeBridgeCallback(bridge("x".repeat(DIRECT_ANSWER_MIN - 1)))).toBeUndefined();
    expect(
      encodeBridgeCallback(create(BridgeCallbackRequestSchema, { callId: "c", outcome: { case: "error", value: { name: "E", message: "m" } } })),
    ).toBeUndefined();
    expect(encodeBridgeCallback(create(BridgeCallbackRequestSchema, { callId: "c" }))).toBeUndefined();
    expect(encodeExecSessionRequest(create(ExecSessionRequestSchema, { message: { case: "exec", value: { code: "return 1" } } }))).toBeUndefined();
    expect(encodeExecSessionRequest(session(bridge("[1]")))).toBeUndefined();
  });

  it("is taken by the sandbox's decoder on its fast path", () => {
    const value = text(100_000, "ünï 😀");
    const decoded = decodeBridgeCallback(encodeBridgeCallback(bridge(value))!);
    expect(decoded.outcome).toEqual({ case: "resultJson", value });
    expect(Buffer.from(answerBytes(decoded)!).toString("utf8")).toBe(value);
  });
});

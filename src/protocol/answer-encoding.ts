/**
 * A gateway's large tool answer encoded straight into one buffer.
 *
 * A tool answer is the `result_json` string of a BridgeCallbackRequest (or of the `answer`
 * of an ExecSessionRequest), and it can be megabytes. protobuf-es's `toBinary` encodes such
 * a string into an array of its own and then copies every part of the message into a final
 * one, on the gateway's thread. Here, for an answer of DIRECT_ANSWER_MIN characters or
 * more, the rest of the message is encoded by `toBinary` without its answer, and the
 * answer's bytes are written once, after it, into a buffer of the exact size.
 *
 * The bytes must decode to the same message: protobuf fields may come in any order, the
 * answer's field is the only member of its oneof written, and both encoders write a lone
 * surrogate as U+FFFD. The sandbox's decoder (../sandbox/exec/answer-wire.ts) takes such a
 * message on its fast path like any other.
 */
import { toBinary } from "@bufbuild/protobuf";
import { BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import {
  BridgeCallbackRequestSchema,
  ExecSessionRequestSchema,
  type BridgeCallbackRequest,
  type ExecSessionRequest,
} from "../gen/codemode/sandbox/v1/sandbox_pb.js";
import type { RequestEncoders } from "./grpc-service.js";

/** Answers at least this many characters long are encoded here; shorter ones by `toBinary`. */
export const DIRECT_ANSWER_MIN = 16 * 1024;

/** The tag and length of field 3 (`result_json` in BridgeCallbackRequest, `answer` in ExecSessionRequest) holding `len` bytes. */
const field3Prefix = (len: number): Uint8Array => new BinaryWriter().tag(3, WireType.LengthDelimited).uint32(len).finish();

/** A BridgeCallbackRequest with a large result, in parts: the rest of it encoded, the result's tag and length, and the text. */
type Parts = { head: Uint8Array; prefix: Uint8Array; text: string; textBytes: number; bytes: number };

function partsOf(m: BridgeCallbackRequest): Parts | undefined {
  if (m.outcome.case !== "resultJson" || m.outcome.value.length < DIRECT_ANSWER_MIN) return undefined;
  const text = m.outcome.value;
  const head = toBinary(BridgeCallbackRequestSchema, { ...m, outcome: { case: undefined } });
  const textBytes = Buffer.byteLength(text, "utf8");
  const prefix = field3Prefix(textBytes);
  return { head, prefix, text, textBytes, bytes: head.length + prefix.length + textBytes };
}

/** Writes `p` at `at` in `buf`; returns the offset after it. */
function writeParts(buf: Buffer, at: number, p: Parts): number {
  buf.set(p.head, at);
  buf.set(p.prefix, (at += p.head.length));
  at += p.prefix.length;
  return at + buf.write(p.text, at, p.textBytes, "utf8");
}

/** `buf`, once the writes ended exactly at its end: never an uninitialised byte on the wire. */
function filled(buf: Buffer, end: number): Buffer {
  if (end !== buf.length) throw new Error(`encoded ${end} of ${buf.length} bytes`);
  return buf;
}

/** `m` encoded, or undefined when its answer is small (or absent): then `toBinary` does it. */
export function encodeBridgeCallback(m: BridgeCallbackRequest): Uint8Array | undefined {
  const p = partsOf(m);
  if (!p) return undefined;
  const buf = Buffer.allocUnsafe(p.bytes);
  return filled(buf, writeParts(buf, 0, p));
}

/** The same for an ExecSessionRequest whose `answer` carries a large result. */
export function encodeExecSessionRequest(m: ExecSessionRequest): Uint8Array | undefined {
  if (m.message.case !== "answer") return undefined;
  const p = partsOf(m.message.value);
  if (!p) return undefined;
  const head = toBinary(ExecSessionRequestSchema, { ...m, message: { case: undefined } });
  const prefix = field3Prefix(p.bytes);
  const buf = Buffer.allocUnsafe(head.length + prefix.length + p.bytes);
  buf.set(head, 0);
  buf.set(prefix, head.length);
  return filled(buf, writeParts(buf, head.length + prefix.length, p));
}

/** By request type name, for clients (./grpc-client.ts). */
export const ANSWER_ENCODERS: RequestEncoders = {
  [BridgeCallbackRequestSchema.typeName]: (m) => encodeBridgeCallback(m as BridgeCallbackRequest),
  [ExecSessionRequestSchema.typeName]: (m) => encodeExecSessionRequest(m as ExecSessionRequest),
};

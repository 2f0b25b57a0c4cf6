/**
 * A large tool answer kept as the bytes it arrived in, so its VM can start parsing before
 * the main thread has even decoded it.
 *
 * A gateway's answer is the `result_json` string of a BridgeCallbackRequest (or of the
 * `answer` of an ExecSessionRequest). Decoded the usual way, it becomes a JS string before
 * the handler runs, only to be encoded back to UTF-8 to be staged to the VM
 * (../worker/staged-answers.ts). These decoders leave a text of STAGE_MIN bytes or more as
 * bytes when it is provably the same text: the handler stages them at once (`answerBytes`)
 * and the string is made when first read, while the VM parses. Only the plain case takes
 * this path, where the result must be exactly what the generated decoder gives:
 * `result_json` once, no other member of its oneof (nor, for ExecSession, of the request's
 * oneof, nor a second `answer`, which protobuf would merge), and valid UTF-8 without a
 * leading byte-order mark. Anything else is decoded by the generated decoder, errors and all.
 */
import { fromBinary } from "@bufbuild/protobuf";
import { BinaryReader, WireType, getTextEncoding } from "@bufbuild/protobuf/wire";
import { isUtf8 } from "node:buffer";
import type { RequestDecoders } from "../../protocol/grpc-service.js";
import {
  BridgeCallbackRequestSchema,
  ExecSessionRequestSchema,
  type BridgeCallbackRequest,
  type ExecSessionRequest,
} from "../../gen/codemode/sandbox/v1/sandbox_pb.js";

/**
 * Answer texts at least this long (in UTF-8 bytes or in characters) are handed to their VM
 * before they are validated (../worker/staged-answers.ts). Below it, the check (about 4 ns
 * a character) costs less than the extra message.
 */
export const STAGE_MIN = 32 * 1024;

/** Field numbers (proto/codemode/sandbox/v1/sandbox.proto). */
const RESULT_JSON = 3;
const ERROR = 4;
const SESSION_EXEC = 1;
const SESSION_WAIT = 2;
const SESSION_ANSWER = 3;

/**
 * The bytes of each answer decoded here, by its `outcome` object: a copy of the request
 * (ExecSession fills in a missing scope with a spread) shares it.
 */
const rawAnswers = new WeakMap<object, Uint8Array>();

/** The UTF-8 bytes of `req`'s result_json when it was left undecoded (large and plain), else undefined. */
export function answerBytes(req: BridgeCallbackRequest): Uint8Array | undefined {
  return rawAnswers.get(req.outcome);
}

type Span = { tagStart: number; start: number; end: number };

/**
 * The single occurrence of length-delimited field `no` at the top level of `bytes`;
 * undefined when it is absent, repeated or of another wire type, when any field in
 * `rivals` occurs, or when the bytes do not walk (the full decoder reports those).
 */
function soleField(bytes: Uint8Array, no: number, rivals: readonly number[]): Span | undefined {
  try {
    const r = new BinaryReader(bytes);
    let found: Span | undefined;
    while (r.pos < r.len) {
      const tagStart = r.pos;
      const [fieldNo, wireType] = r.tag();
      if (rivals.includes(fieldNo)) return undefined;
      if (fieldNo !== no) {
        r.skip(wireType, fieldNo);
        continue;
      }
      if (found || wireType !== WireType.LengthDelimited) return undefined;
      const value = r.bytes();
      found = { tagStart, start: r.pos - value.byteLength, end: r.pos };
    }
    return found;
  } catch {
    return undefined;
  }
}

/** `bytes` without the span's field. */
function without(bytes: Uint8Array, span: Span): Uint8Array {
  const rest = new Uint8Array(bytes.byteLength - (span.end - span.tagStart));
  rest.set(bytes.subarray(0, span.tagStart), 0);
  rest.set(bytes.subarray(span.end), span.tagStart);
  return rest;
}

const startsWithBom = (b: Uint8Array) => b.byteLength >= 3 && b[0] === 0xef && b[1] === 0xbb && b[2] === 0xbf;

/** A BridgeCallbackRequest with its large plain result_json left as bytes, or undefined. */
function withRawAnswer(bytes: Uint8Array): BridgeCallbackRequest | undefined {
  // Too short to hold a text that long: not worth the walk.
  if (bytes.byteLength < STAGE_MIN) return undefined;
  const span = soleField(bytes, RESULT_JSON, [ERROR]);
  if (!span || span.end - span.start < STAGE_MIN) return undefined;
  const raw = bytes.subarray(span.start, span.end);
  if (!isUtf8(raw) || startsWithBom(raw)) return undefined;
  let req: BridgeCallbackRequest;
  try {
    req = fromBinary(BridgeCallbackRequestSchema, without(bytes, span));
  } catch {
    return undefined;
  }
  let text: string | undefined;
  const outcome: BridgeCallbackRequest["outcome"] = {
    case: "resultJson",
    get value(): string {
      return (text ??= getTextEncoding().decodeUtf8(raw, true));
    },
  };
  req.outcome = outcome;
  rawAnswers.set(outcome, raw);
  return req;
}

/** Decodes a BridgeCallbackRequest; throws as the generated decoder does. */
export function decodeBridgeCallback(bytes: Uint8Array): BridgeCallbackRequest {
  return withRawAnswer(bytes) ?? fromBinary(BridgeCallbackRequestSchema, bytes);
}

/** Decodes an ExecSessionRequest; throws as the generated decoder does. */
export function decodeExecSessionRequest(bytes: Uint8Array): ExecSessionRequest {
  if (bytes.byteLength < STAGE_MIN) return fromBinary(ExecSessionRequestSchema, bytes);
  const span = soleField(bytes, SESSION_ANSWER, [SESSION_EXEC, SESSION_WAIT]);
  const answer = span && span.end - span.start >= STAGE_MIN ? withRawAnswer(bytes.subarray(span.start, span.end)) : undefined;
  if (!span || !answer) return fromBinary(ExecSessionRequestSchema, bytes);
  let req: ExecSessionRequest;
  try {
    req = fromBinary(ExecSessionRequestSchema, without(bytes, span));
  } catch {
    return fromBinary(ExecSessionRequestSchema, bytes);
  }
  req.message = { case: "answer", value: answer };
  return req;
}

/** The Sandbox service's request decoders (../../protocol/grpc-service.ts `addService`). */
export const ANSWER_DECODERS: RequestDecoders = {
  [BridgeCallbackRequestSchema.typeName]: decodeBridgeCallback,
  [ExecSessionRequestSchema.typeName]: decodeExecSessionRequest,
};

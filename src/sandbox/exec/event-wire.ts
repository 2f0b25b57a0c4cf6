/**
 * The Sandbox service's per-call responses encoded without protobuf-es: an ExecEvent
 * carrying a ToolCallRequested (sent once per nested call) written straight from the plain
 * object the segment sends into one buffer, and a BridgeCallbackResponse from its one
 * boolean. `create` and `toBinary` would first build a message object, then encode each
 * string into an array of its own and copy the parts together.
 *
 * The bytes are exactly those `toBinary(create(schema, init))` gives: fields in declaration
 * order, a string or enum at its default left out, UTF-8 with a lone surrogate as U+FFFD.
 * The field table is read from the generated schema when this module loads; a shape it does
 * not cover (another field type, a message already created, a value that is not a string or
 * a small non-negative integer) returns undefined, and the generated encoder does it.
 */
import { ScalarType } from "@bufbuild/protobuf";
import { BridgeCallbackResponseSchema, ExecEventSchema, ToolCallRequestedSchema } from "../../gen/codemode/sandbox/v1/sandbox_pb.js";
import type { ResponseEncoders } from "../../protocol/grpc-service.js";

/** Presence of a proto3 field without `optional`: left out at its default. */
const IMPLICIT = 2;
/** Strings longer than this are measured and written by Buffer's native UTF-8 code. */
const SHORT_STRING = 64;

type Field = { key: string; tag: number; kind: "string" | "enum" };

/** ToolCallRequested's fields as this encoder writes them, or undefined when one is of a kind it does not write. */
function toolCallFields(): Field[] | undefined {
  const fields: Field[] = [];
  for (const f of ToolCallRequestedSchema.fields) {
    if (f.number > 15 || f.oneof !== undefined || f.presence !== IMPLICIT) return undefined;
    if (f.fieldKind === "scalar" && f.scalar === ScalarType.STRING) fields.push({ key: f.localName, tag: (f.number << 3) | 2, kind: "string" });
    else if (f.fieldKind === "enum") fields.push({ key: f.localName, tag: f.number << 3, kind: "enum" });
    else return undefined;
  }
  return fields;
}

const FIELDS = toolCallFields();
/** ExecEvent's `tool_call`: field 1, length-delimited. */
const TOOL_CALL_TAG = (ExecEventSchema.field.toolCall?.number ?? 0) === 1 ? 0x0a : undefined;

const varintLength = (n: number): number => (n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : n < 0x10000000 ? 4 : 5);

function writeVarint(buf: Buffer, at: number, n: number): number {
  while (n > 0x7f) {
    buf[at++] = (n & 0x7f) | 0x80;
    n >>>= 7;
  }
  buf[at++] = n;
  return at;
}

/** UTF-8 length of `s` (a lone surrogate counts as U+FFFD's 3 bytes, as both encoders write it). */
function utf8Length(s: string): number {
  if (s.length > SHORT_STRING) return Buffer.byteLength(s, "utf8");
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) > 0x7f) return Buffer.byteLength(s, "utf8");
  return s.length;
}

function writeString(buf: Buffer, at: number, s: string, bytes: number): number {
  if (bytes !== s.length) return at + buf.write(s, at, bytes, "utf8");
  for (let i = 0; i < bytes; i++) buf[at + i] = s.charCodeAt(i);
  return at + bytes;
}

const isPlain = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v) && !("$typeName" in v) && !("$unknown" in v);

/** An ExecEvent init with a ToolCallRequested, encoded; undefined for any other event or shape. */
export function encodeToolCallEvent(init: unknown): Uint8Array | undefined {
  if (!FIELDS || TOOL_CALL_TAG === undefined || !isPlain(init)) return undefined;
  const event = init.event;
  if (!isPlain(event) || event.case !== "toolCall") return undefined;
  const call = event.value;
  if (!isPlain(call)) return undefined;
  const values: Array<string | number | undefined> = new Array(FIELDS.length);
  const lengths: number[] = new Array(FIELDS.length);
  let size = 0;
  for (let i = 0; i < FIELDS.length; i++) {
    const f = FIELDS[i]!;
    const v = call[f.key];
    // `create` takes null as unset; `toBinary` leaves a default out.
    if (v === undefined || v === null) continue;
    if (f.kind === "string") {
      if (typeof v !== "string") return undefined;
      if (v === "") continue;
      const n = utf8Length(v);
      lengths[i] = n;
      size += 1 + varintLength(n) + n;
    } else {
      if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > 0x7fffffff) return undefined;
      if (v === 0) continue;
      size += 1 + varintLength(v);
    }
    values[i] = v;
  }
  const buf = Buffer.allocUnsafe(1 + varintLength(size) + size);
  buf[0] = TOOL_CALL_TAG;
  let at = writeVarint(buf, 1, size);
  for (let i = 0; i < FIELDS.length; i++) {
    const v = values[i];
    if (v === undefined) continue;
    buf[at++] = FIELDS[i]!.tag;
    if (typeof v === "number") at = writeVarint(buf, at, v);
    else at = writeString(buf, writeVarint(buf, at, lengths[i]!), v, lengths[i]!);
  }
  if (at !== buf.length) throw new Error(`encoded ${at} of ${buf.length} bytes`);
  return buf;
}

const DELIVERED_LIVE = new Uint8Array([0x08, 0x01]);
const NOT_DELIVERED_LIVE = new Uint8Array(0);
const DELIVERED_LIVE_OK = BridgeCallbackResponseSchema.fields.length === 1 && BridgeCallbackResponseSchema.field.deliveredLive?.number === 1;

/** A BridgeCallbackResponse init of `{ deliveredLive }` alone, encoded; undefined for any other shape. */
export function encodeBridgeCallbackResponse(init: unknown): Uint8Array | undefined {
  if (!DELIVERED_LIVE_OK || !isPlain(init)) return undefined;
  const keys = Object.keys(init);
  if (keys.length !== 1 || keys[0] !== "deliveredLive" || typeof init.deliveredLive !== "boolean") return undefined;
  return init.deliveredLive ? DELIVERED_LIVE : NOT_DELIVERED_LIVE;
}

/** The Sandbox service's response encoders (../../protocol/grpc-service.ts `addService`). */
export const EVENT_ENCODERS: ResponseEncoders = {
  [ExecEventSchema.typeName]: encodeToolCallEvent,
  [BridgeCallbackResponseSchema.typeName]: encodeBridgeCallbackResponse,
};

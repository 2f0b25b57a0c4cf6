/**
 * The seed's rules for internal namespaces, checked when a gateway registers one, so a
 * bad registration is refused whole with a message naming the offending path and never
 * reaches a run: identifiers and ownership fields, `globalName` collisions with the
 * guest's own globals, and the scope serialization rules (plain JSON, no unsafe keys,
 * tool markers that target only declared backing tools, context markers by name).
 */
import type { NamespaceRegistration } from "../../gen/codemode/orchestrator/v1/control_pb.js";
import { ServiceError } from "../../protocol/service-error.js";
import { CONTEXT_NAMES, PATH_SEPARATOR, UNSAFE_KEYS } from "../../shared/namespace-scope.js";

/** A registration that passed every rule, in the form the registry keeps. */
export type CheckedNamespace = {
  pluginId: string;
  id: string;
  globalName: string;
  description: string;
  prompt: string;
  requiredToolNames: string[];
  /** Canonical JSON text of the scope. */
  scopeJson: string;
  callableCount: number;
};

const OWNER_RE = /^[A-Za-z0-9_.-]{1,128}$/;
const ID_RE = /^[A-Za-z0-9_.:-]{1,128}$/;
const IDENT_RE = /^[A-Za-z_$][A-Za-z0-9_$]{0,63}$/;
const TOOL_NAME_RE = /^[A-Za-z0-9_.-]{1,128}$/;
const MAX_SCOPE_BYTES = 64 * 1024;
const MAX_SCOPE_DEPTH = 16;
const MAX_CALLABLES = 256;
const MAX_ARGS = 16;
const MAX_REQUIRED = 64;
const MAX_DESCRIPTION = 2_000;
const MAX_PROMPT = 4_000;

/** Globals of the guest runtime a namespace may never shadow. */
const CODE_MODE_GLOBALS = ["tools", "namespaces", "text", "json", "yield_control", "MCP", "API", "ALL_TOOLS", "console"];
/** ECMAScript and web-platform globals guest code relies on. */
const STANDARD_GLOBALS = (
  "globalThis Object Function Array Number String Boolean Symbol BigInt Math JSON Date RegExp Error AggregateError EvalError RangeError " +
  "ReferenceError SyntaxError TypeError URIError Promise Proxy Reflect Map Set WeakMap WeakSet WeakRef FinalizationRegistry ArrayBuffer " +
  "SharedArrayBuffer DataView Atomics Int8Array Uint8Array Uint8ClampedArray Int16Array Uint16Array Int32Array Uint32Array Float32Array " +
  "Float64Array BigInt64Array BigUint64Array Intl eval isFinite isNaN parseFloat parseInt decodeURI decodeURIComponent encodeURI " +
  "encodeURIComponent escape unescape Infinity NaN undefined setTimeout clearTimeout setInterval clearInterval queueMicrotask " +
  "structuredClone URL URLSearchParams TextEncoder TextDecoder atob btoa performance crypto fetch require process module exports import"
).split(" ");
const RESERVED_WORDS = (
  "break case catch class const continue debugger default delete do else enum export extends false finally for function if import in " +
  "instanceof new null return super switch this throw true try typeof var void while with yield let static await implements interface " +
  "package private protected public arguments"
).split(" ");
const FORBIDDEN_GLOBALS = new Set([...CODE_MODE_GLOBALS, ...STANDARD_GLOBALS, ...RESERVED_WORDS]);
const INTERNAL_PREFIXES = ["__openclaw", "__cm", "__codemode"];

function invalid(message: string): ServiceError {
  return new ServiceError("invalid_argument", `namespace: ${message}`);
}

function checkGlobalName(name: string): void {
  if (!IDENT_RE.test(name))
    throw invalid(`globalName must be a JavaScript identifier (letters, digits, '_', '$'; not starting with a digit; at most 64), got ${JSON.stringify(name)}`);
  if (FORBIDDEN_GLOBALS.has(name)) throw invalid(`globalName ${name} collides with a built-in global of the code-mode runtime`);
  if (INTERNAL_PREFIXES.some((p) => name.startsWith(p)))
    throw invalid(`globalName ${name} uses a prefix reserved for the runtime (${INTERNAL_PREFIXES.join(", ")})`);
}

type Walk = { required: ReadonlySet<string>; callables: number };

function location(path: readonly string[]): string {
  return path.length === 0 ? "scope" : `scope.${path.join(PATH_SEPARATOR)}`;
}

function checkKey(key: string, path: readonly string[]): void {
  if (key === "" || UNSAFE_KEYS.has(key) || key.includes(PATH_SEPARATOR)) {
    throw invalid(`${location(path)} has an unsafe key ${JSON.stringify(key)} (empty, __proto__, constructor, prototype, or containing "${PATH_SEPARATOR}")`);
  }
}

function checkToolMarker(marker: Record<string, unknown>, path: readonly string[], w: Walk): void {
  const where = location(path);
  for (const k of Object.keys(marker))
    if (k !== "$tool" && k !== "args") throw invalid(`${where} is a tool marker with an unknown field ${JSON.stringify(k)} (allowed: $tool, args)`);
  const tool = marker.$tool;
  if (typeof tool !== "string" || !TOOL_NAME_RE.test(tool)) throw invalid(`${where}.$tool must name a catalog tool, got ${JSON.stringify(tool)}`);
  if (!w.required.has(tool)) throw invalid(`${where} targets tool ${tool}, which is not in requiredToolNames; callable paths may target only declared tools`);
  if (marker.args !== undefined) {
    const args = marker.args;
    if (!Array.isArray(args) || args.length > MAX_ARGS) throw invalid(`${where}.args must be an array of at most ${MAX_ARGS} input field names`);
    const seen = new Set<string>();
    args.forEach((a, i) => {
      if (typeof a !== "string" || a === "" || UNSAFE_KEYS.has(a))
        throw invalid(`${where}.args[${i}] must be a non-empty input field name, got ${JSON.stringify(a)}`);
      if (seen.has(a)) throw invalid(`${where}.args names ${a} twice`);
      seen.add(a);
    });
  }
  if (++w.callables > MAX_CALLABLES) throw invalid(`scope has more than ${MAX_CALLABLES} callable members`);
}

function checkValue(value: unknown, path: string[], depth: number, w: Walk): void {
  if (value === null || typeof value !== "object") return;
  if (depth > MAX_SCOPE_DEPTH) throw invalid(`${location(path)} nests deeper than ${MAX_SCOPE_DEPTH} levels`);
  if (Array.isArray(value)) {
    value.forEach((v, i) => {
      checkValue(v, [...path, String(i)], depth + 1, w);
    });
    return;
  }
  const obj = value as Record<string, unknown>;
  if (Object.hasOwn(obj, "$tool")) return checkToolMarker(obj, path, w);
  if (Object.hasOwn(obj, "$context")) {
    const keys = Object.keys(obj);
    if (keys.length !== 1 || !(CONTEXT_NAMES as readonly unknown[]).includes(obj.$context)) {
      throw invalid(`${location(path)} is a context marker; it must be exactly {"$context": ${CONTEXT_NAMES.map((n) => JSON.stringify(n)).join(" | ")}}`);
    }
    return;
  }
  for (const key of Object.keys(obj)) {
    checkKey(key, path);
    checkValue(obj[key], [...path, key], depth + 1, w);
  }
}

/** Checks a registration against every rule; throws INVALID_ARGUMENT naming what is wrong. */
export function checkRegistration(reg: NamespaceRegistration | undefined): CheckedNamespace {
  if (!reg) throw invalid("the request must carry a namespace");
  if (!OWNER_RE.test(reg.pluginId))
    throw invalid(`pluginId must be the owning plugin's id (letters, digits, '_', '-', '.'), got ${JSON.stringify(reg.pluginId)}`);
  if (!ID_RE.test(reg.id)) throw invalid(`id must be 1-128 letters, digits, '_', '-', '.', ':', got ${JSON.stringify(reg.id)}`);
  checkGlobalName(reg.globalName);
  if (reg.description.length > MAX_DESCRIPTION) throw invalid(`description is longer than ${MAX_DESCRIPTION} characters`);
  if (reg.prompt.length > MAX_PROMPT) throw invalid(`prompt is longer than ${MAX_PROMPT} characters`);
  if (reg.requiredToolNames.length === 0) throw invalid("requiredToolNames must name the plugin's tools that back the namespace");
  if (reg.requiredToolNames.length > MAX_REQUIRED) throw invalid(`requiredToolNames holds at most ${MAX_REQUIRED} names`);
  reg.requiredToolNames.forEach((n, i) => {
    if (!TOOL_NAME_RE.test(n)) throw invalid(`requiredToolNames[${i}] is not a tool name: ${JSON.stringify(n)}`);
  });
  if (Buffer.byteLength(reg.scopeJson, "utf8") > MAX_SCOPE_BYTES) throw invalid(`scope is larger than ${MAX_SCOPE_BYTES} bytes`);
  let scope: unknown;
  try {
    scope = JSON.parse(reg.scopeJson || "{}");
  } catch (err) {
    throw invalid(`scope_json is not JSON: ${(err as Error).message}`);
  }
  if (scope === null || typeof scope !== "object" || Array.isArray(scope)) throw invalid("scope must be a JSON object");
  if (Object.hasOwn(scope, "$tool") || Object.hasOwn(scope, "$context")) throw invalid("scope must be an object of members, not a marker itself");
  const w: Walk = { required: new Set(reg.requiredToolNames), callables: 0 };
  checkValue(scope, [], 0, w);
  return {
    pluginId: reg.pluginId,
    id: reg.id,
    globalName: reg.globalName,
    description: reg.description.trim(),
    prompt: reg.prompt.trim(),
    requiredToolNames: [...new Set(reg.requiredToolNames)].sort(),
    scopeJson: JSON.stringify(scope),
    callableCount: w.callables,
  };
}

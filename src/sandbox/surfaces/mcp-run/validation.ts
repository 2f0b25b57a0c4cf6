/**
 * Host-side input validation of `codemode.run` tool calls (spec 7.2): before a call
 * leaves the sidecar, its input is checked against the tool's input schema with ajv
 * (draft-07, or 2020-12 when the schema says so; formats are not checked). A failure never
 * reaches the gateway: the guest gets a SchemaValidationError naming the canonical tool
 * name and export name, the JSON Pointer of the failing value, what was expected and
 * received, a hint, and a minimal example (the schema's `examples`, else the tool's
 * examples, else one synthesized from the schema). Validators are compiled once per tool
 * per catalog version; a schema ajv cannot compile is not checked here (the server still
 * checks its own input).
 */
import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import { Ajv2020 } from "ajv/dist/2020.js";
import type { McpRunServer, McpRunTool } from "../../../shared/mcp-run/naming.js";

const OPTIONS = { strict: false, allErrors: false, validateFormats: false, validateSchema: false, allowUnionTypes: true, messages: true } as const;
let draft07: Ajv | undefined;
let draft2020: Ajv2020 | undefined;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** A compiled validator for a schema, or undefined when ajv cannot compile it. */
export function compileValidator(schema: unknown): ValidateFunction | undefined {
  if (schema === undefined || schema === true) return undefined;
  if (!isRecord(schema)) return undefined;
  const { $schema, $id: _id, ...rest } = schema;
  const modern = typeof $schema === "string" && /20(19-09|20-12)/.test($schema);
  try {
    if (modern) return (draft2020 ??= new Ajv2020(OPTIONS)).compile(rest);
    return (draft07 ??= new Ajv(OPTIONS)).compile(rest);
  } catch {
    return undefined;
  }
}

function jsonType(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (v === undefined) return "nothing";
  return typeof v === "number" ? (Number.isInteger(v) ? "integer" : "number") : typeof v;
}

function preview(v: unknown): string {
  if (v === undefined) return "nothing";
  const text = JSON.stringify(v) ?? String(v);
  return text.length > 80 ? `${text.slice(0, 79)}…` : text;
}

const escapePointer = (s: string) => s.replace(/~/g, "~0").replace(/\//g, "~1");

function at(input: unknown, pointer: string): unknown {
  let v = input;
  for (const raw of pointer.split("/").slice(1)) {
    const key = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (Array.isArray(v)) v = v[Number(key)];
    else if (isRecord(v)) v = Object.hasOwn(v, key) ? v[key] : undefined;
    else return undefined;
  }
  return v;
}

/** A minimal input that satisfies the schema's shape, for the error's example. */
function synthesize(schema: unknown, root: unknown, depth: number, name: string): unknown {
  if (!isRecord(schema) || depth > 8) return name ? `<${name}>` : {};
  if (Array.isArray(schema.examples) && schema.examples.length > 0) return schema.examples[0];
  if ("const" in schema) return schema.const;
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0];
  if ("default" in schema) return schema.default;
  if (typeof schema.$ref === "string" && schema.$ref.startsWith("#")) return synthesize(at(root, schema.$ref.slice(1)), root, depth + 1, name);
  for (const k of ["oneOf", "anyOf", "allOf"] as const) {
    const list = schema[k];
    if (Array.isArray(list) && list.length > 0) return synthesize(list.find((s) => !(isRecord(s) && s.type === "null")) ?? list[0], root, depth + 1, name);
  }
  const types = Array.isArray(schema.type) ? schema.type.filter((t) => t !== "null") : [schema.type ?? (isRecord(schema.properties) ? "object" : undefined)];
  switch (types[0]) {
    case "object": {
      const out: Record<string, unknown> = {};
      const props = isRecord(schema.properties) ? schema.properties : {};
      for (const key of Array.isArray(schema.required) ? schema.required : []) {
        if (typeof key === "string") out[key] = synthesize(props[key], root, depth + 1, key);
      }
      return out;
    }
    case "array": {
      const min = typeof schema.minItems === "number" ? schema.minItems : 0;
      return min > 0 ? [synthesize(Array.isArray(schema.items) ? schema.items[0] : schema.items, root, depth + 1, name)] : [];
    }
    case "string":
      return name ? `<${name}>` : "<text>";
    case "integer":
    case "number":
      return typeof schema.minimum === "number" ? schema.minimum : 0;
    case "boolean":
      return false;
    case "null":
      return null;
    default:
      return name ? `<${name}>` : {};
  }
}

function explain(e: ErrorObject, input: unknown): { path: string; expected: string; received: string } {
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case "required": {
      const path = `${e.instancePath}/${escapePointer(String(p.missingProperty))}`;
      return { path, expected: "a value (the property is required)", received: "nothing (it is missing)" };
    }
    case "additionalProperties": {
      const path = `${e.instancePath}/${escapePointer(String(p.additionalProperty))}`;
      return { path, expected: "no such property (the schema allows no additional properties)", received: preview(at(input, path)) };
    }
    case "type":
      return {
        path: e.instancePath,
        expected: Array.isArray(p.type) ? p.type.join(" | ") : String(p.type),
        received: `${jsonType(at(input, e.instancePath))} ${preview(at(input, e.instancePath))}`,
      };
    case "enum":
      return { path: e.instancePath, expected: `one of ${preview(p.allowedValues)}`, received: preview(at(input, e.instancePath)) };
    case "const":
      return { path: e.instancePath, expected: preview(p.allowedValue), received: preview(at(input, e.instancePath)) };
    default:
      return { path: e.instancePath, expected: `a value that ${e.message ?? `passes "${e.keyword}"`}`, received: preview(at(input, e.instancePath)) };
  }
}

/**
 * Checks one call's input. Undefined when it is valid (or not checkable); otherwise the
 * `{name, message}` the guest turns into a SchemaValidationError (message: JSON details).
 */
export function validateInput(
  validate: ValidateFunction | undefined,
  server: McpRunServer,
  tool: McpRunTool,
  inputJson: string,
): { name: string; message: string } | undefined {
  if (!validate) return undefined;
  let input: unknown;
  try {
    input = JSON.parse(inputJson) as unknown;
  } catch {
    return undefined;
  }
  if (validate(input)) return undefined;
  const first = validate.errors?.[0];
  if (!first) return undefined;
  const { path, expected, received } = explain(first, input);
  const schema = tool.inputSchema;
  const example =
    isRecord(schema) && Array.isArray(schema.examples) && schema.examples.length > 0
      ? schema.examples[0]
      : (tool.examples[0] ?? synthesize(schema, schema, 0, ""));
  const label = `${server.serverId}.${tool.exportName}`;
  const where = path === "" ? "the input" : `input${path}`;
  const message = `${label} (MCP tool ${JSON.stringify(tool.toolName)}): ${where} is invalid: expected ${expected}, received ${received}.`;
  const fix =
    first.keyword === "required"
      ? `Add the required ${where}`
      : first.keyword === "additionalProperties"
        ? `Remove ${where}`
        : `Fix ${where} to be ${expected}`;
  const hint = `${fix} (JSON Pointer ${JSON.stringify(path)}), e.g. ${tool.exportName}(${preview(example)}).`;
  return { name: "SchemaValidationError", message: JSON.stringify({ message, hint, path, expected, received, example }) };
}

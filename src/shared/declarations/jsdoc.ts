/**
 * Text helpers shared by the declaration generators: doc comments that can never end
 * early (untrusted descriptions may contain `*` + `/`), short one-line summaries, the
 * JSDoc lines a JSON Schema's annotations produce, and TypeScript literal types for
 * `enum`/`const` values.
 */

const LINE_BREAK = /\r\n|[\r\n\u2028\u2029]/;

/** Make text safe inside a block comment: `*` + `/` can no longer close it. */
export function escapeComment(text: string): string {
  return text.replace(/\*\//g, "*\\/");
}

/** Collapse whitespace to single spaces and cap the length (with an ellipsis). */
export function oneLine(text: string, max: number): string {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length <= max ? flat : `${flat.slice(0, Math.max(0, max - 1)).trimEnd()}…`;
}

/** The first sentence of a text, on one line, at most `max` characters. */
export function firstSentence(text: string, max: number): string {
  const flat = oneLine(text, Number.MAX_SAFE_INTEGER);
  const end = flat.search(/[.!?](\s|$)/);
  return oneLine(end >= 0 ? flat.slice(0, end + 1) : flat, max);
}

/** Cap a (possibly multi-line) text at `max` characters. */
export function capText(text: string, max: number): string {
  const trimmed = text.trim();
  return trimmed.length <= max ? trimmed : `${trimmed.slice(0, Math.max(0, max - 1)).trimEnd()}…`;
}

/**
 * A doc comment whose lines each start with `indent`, ending with a newline; "" for no
 * lines. One short line gives the compact form.
 */
export function docBlock(lines: readonly string[], indent: string): string {
  const split = lines.flatMap((l) => escapeComment(l).split(LINE_BREAK)).map((l) => l.trimEnd());
  while (split.length > 0 && split[split.length - 1] === "") split.pop();
  while (split.length > 0 && split[0] === "") split.shift();
  if (split.length === 0) return "";
  const only = split[0] ?? "";
  if (split.length === 1 && only.length + indent.length <= 110) return `${indent}/** ${only} */\n`;
  return `${indent}/**\n${split.map((l) => (l ? `${indent} * ${l}` : `${indent} *`)).join("\n")}\n${indent} */\n`;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** JSON on one line, capped at `max` characters; undefined when it cannot be serialised. */
export function compactJson(value: unknown, max: number): string | undefined {
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch {
    return undefined;
  }
  if (text === undefined) return undefined;
  return text.length <= max ? text : `${text.slice(0, max - 1)}…`;
}

/**
 * JSDoc lines from a schema's annotations: description (or title), `@default`,
 * `@format`, up to two `@example`s and `@deprecated`. Unescaped; docBlock escapes.
 */
export function schemaDocLines(schema: unknown, maxDescription = 1000): string[] {
  if (!isRecord(schema)) return [];
  const lines: string[] = [];
  const text = typeof schema.description === "string" ? schema.description : typeof schema.title === "string" ? schema.title : "";
  if (text.trim()) lines.push(capText(text, maxDescription));
  if ("default" in schema) {
    const d = compactJson(schema.default, 200);
    if (d !== undefined) lines.push(`@default ${d}`);
  }
  if (typeof schema.format === "string" && schema.format) lines.push(`@format ${oneLine(schema.format, 60)}`);
  const examples = Array.isArray(schema.examples) ? schema.examples : "example" in schema ? [schema.example] : [];
  for (const ex of examples.slice(0, 2)) {
    const e = compactJson(ex, 200);
    if (e !== undefined) lines.push(`@example ${e}`);
  }
  if (schema.deprecated === true) lines.push("@deprecated");
  return lines;
}

/** A TypeScript type that admits exactly this JSON value (`unknown` below 16 levels of nesting). */
export function literalType(value: unknown, depth = 0): string {
  if (value === null || typeof value === "boolean" || typeof value === "string") return JSON.stringify(value);
  if (typeof value === "number") return Number.isFinite(value) ? JSON.stringify(value) : "number";
  if (depth >= 16) return "unknown";
  if (Array.isArray(value)) return `[${value.map((v) => literalType(v, depth + 1)).join(", ")}]`;
  if (isRecord(value)) {
    const entries = Object.keys(value).map((k) => `${propertyKey(k)}: ${literalType(value[k], depth + 1)}`);
    return entries.length === 0 ? "{ [key: string]: never }" : `{ ${entries.join("; ")} }`;
  }
  return "unknown";
}

/** A property name as written in a type literal: bare when it is a plain identifier. */
export function propertyKey(name: string): string {
  return /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(name) ? name : JSON.stringify(name);
}

/**
 * A compact JSON Schema → TypeScript type generator for MCP tool declarations (Code
 * Mode for MCP spec 6.2). Pure and dependency-free. It covers the shapes MCP servers
 * publish (types and type arrays, enum/const, oneOf/anyOf/allOf, OpenAPI `nullable`,
 * same-document `$ref` including recursion, additional/pattern properties, tuples);
 * whatever it cannot represent becomes `unknown` (or is left out, widening the type)
 * with a `Warning:` doc comment, never a type narrower than the schema.
 */
import { docBlock, escapeComment, literalType, propertyKey, schemaDocLines } from "./jsdoc.js";

export type SchemaToTypeOptions = {
  /** Prefix for named aliases of referenced definitions: `<prefix>_<Def>`. */
  aliasPrefix: string;
  /** Indentation of the line the type starts on; continuation lines and aliases use it. */
  indent?: string;
  /** Type names already taken where the aliases go; new alias names are added to it. */
  usedNames?: Set<string>;
  /**
   * false: the root object's own properties carry only warnings, no description/default
   * docs (the caller documents them, e.g. as `@param input.<name>`). Default true.
   */
  rootPropertyDocs?: boolean;
  /** Deeper nesting becomes `unknown` with a warning. Default 32. */
  maxDepth?: number;
};

export type SchemaToTypeResult = {
  /** The type expression; multi-line when objects carry docs. */
  type: string;
  /** Complete `type <prefix>_<Def> = ...;` declarations (with docs), each line indented. */
  aliases: string[];
  /** Every construct that was not represented, as `<json pointer>: <what>`, for logs. */
  warnings: string[];
};

const UNION = 0;
const INTERSECTION = 1;
const PRIMARY = 2;
type Prec = typeof UNION | typeof INTERSECTION | typeof PRIMARY;
/** A generated type: its text, how tightly it binds, and warnings for the nearest doc. */
type Out = { text: string; prec: Prec; notes: string[] };

const STEP = "  ";
const MAX_ALIASES = 200;
const MAX_ENUM = 200;
/** Keywords that shape values but have no TypeScript counterpart here. */
const UNSUPPORTED = ["not", "if", "then", "else", "dependentSchemas"];
const OBJECT_KEYWORDS = ["properties", "additionalProperties", "patternProperties", "required"];
const ARRAY_KEYWORDS = ["items", "prefixItems", "additionalItems"];

type Alias = { name: string; pointer: string; body: string; doc: string[]; unguarded: Set<string> };

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

const prim = (text: string, notes: string[] = []): Out => ({ text, prec: PRIMARY, notes });
const paren = (o: Out, min: Prec): string => (o.prec < min ? `(${o.text})` : o.text);
const merge = (outs: readonly Out[]): string[] => [...new Set(outs.flatMap((o) => o.notes))];

function union(outs: readonly Out[]): Out {
  const notes = merge(outs);
  if (outs.length === 0) return prim("never", notes);
  if (outs.some((o) => o.text === "unknown")) return prim("unknown", notes);
  const live = outs.filter((o) => o.text !== "never");
  const texts = [...new Set(live.map((o) => o.text))];
  if (texts.length === 0) return prim("never", notes);
  if (texts.length === 1) return { ...(live[0] as Out), notes };
  return { text: texts.join(" | "), prec: UNION, notes };
}

function intersection(outs: readonly Out[]): Out {
  const notes = merge(outs);
  const live = outs.filter((o) => o.text !== "unknown");
  const texts = [...new Set(live.map((o) => paren(o, INTERSECTION)))];
  if (texts.length === 0) return prim("unknown", notes);
  if (texts.length === 1) return { ...(live[0] as Out), notes };
  return { text: texts.join(" & "), prec: INTERSECTION, notes };
}

function pointerSegment(key: string): string {
  return key.replace(/~/g, "~0").replace(/\//g, "~1");
}

/** Resolve a JSON pointer (already percent-decoded) inside the document. */
function resolvePointer(root: unknown, pointer: string): unknown {
  if (pointer === "") return root;
  let node: unknown = root;
  for (const raw of pointer.slice(1).split("/")) {
    const seg = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (Array.isArray(node) && /^(0|[1-9]\d*)$/.test(seg)) node = node[Number(seg)];
    else if (isRecord(node) && Object.hasOwn(node, seg)) node = node[seg];
    else return undefined;
  }
  return node;
}

function identifierPart(text: string): string {
  return text.replace(/[^A-Za-z0-9_$]/g, "_");
}

class Generator {
  readonly aliases = new Map<string, Alias>();
  readonly warnings: string[] = [];
  private readonly queue: Alias[] = [];
  /** Objects/arrays entered in the body being generated; a ref at 0 is unguarded. */
  private guard = 0;
  private current: Alias | undefined;
  private readonly prefix: string;

  constructor(
    private readonly root: unknown,
    prefix: string,
    private readonly used: Set<string>,
    private readonly rootPropertyDocs: boolean,
    private readonly maxDepth: number,
  ) {
    const p = identifierPart(prefix);
    this.prefix = p === "" ? "T" : /^\d/.test(p) ? `_${p}` : p;
  }

  /** `unknown`, with a warning for the nearest doc comment and the warnings list. */
  private unknown(path: string, what: string): Out {
    this.warnings.push(`${path}: ${what} is not represented`);
    return prim("unknown", [`Warning: ${what} is not represented; typed as unknown.`]);
  }

  node(schema: unknown, path: string, depth: number, indent: string, isRoot = false): Out {
    if (schema === true) return prim("unknown");
    if (schema === false) return prim("never");
    if (!isRecord(schema)) return this.unknown(path, "a value that is not a schema");
    if (depth > this.maxDepth) return this.unknown(path, `nesting deeper than ${this.maxDepth} levels`);
    // Siblings of $ref are ignored (draft-07), except OpenAPI's nullable, which only widens.
    if (typeof schema.$ref === "string") {
      const target = this.ref(schema.$ref, path);
      return schema.nullable === true && target.text !== "unknown" ? union([target, prim("null")]) : target;
    }
    for (const k of ["$dynamicRef", "$recursiveRef"]) if (typeof schema[k] === "string") return this.unknown(path, k);

    const parts: Out[] = [];
    const base = this.base(schema, path, depth, indent, isRoot);
    if (base) parts.push(base);
    if (Array.isArray(schema.allOf)) {
      schema.allOf.forEach((s, i) => {
        parts.push(this.node(s, `${path}/allOf/${i}`, depth + 1, indent));
      });
    }
    for (const k of ["anyOf", "oneOf"] as const) {
      const members = schema[k];
      if (Array.isArray(members)) parts.push(union(members.map((s, i) => this.node(s, `${path}/${k}/${i}`, depth + 1, indent))));
    }
    let out = intersection(parts);
    if (schema.nullable === true && out.text !== "unknown") out = union([out, prim("null")]);

    const ignored = UNSUPPORTED.filter((k) => k in schema);
    // A schema-valued `dependencies` entry is draft-07's dependentSchemas.
    if (isRecord(schema.dependencies) && Object.values(schema.dependencies).some((d) => !Array.isArray(d))) ignored.push("dependencies");
    // Ignoring unevaluatedProperties: false only widens; a schema would also admit keys we do not.
    if ("unevaluatedProperties" in schema && schema.unevaluatedProperties !== false) ignored.push("unevaluatedProperties");
    if (ignored.length > 0) {
      const what = ignored.join("/");
      this.warnings.push(`${path}: ${what} is not represented`);
      const note =
        out.text === "unknown"
          ? `Warning: ${what} is not represented; typed as unknown.`
          : `Warning: ${what} is not represented; the type may accept more than the schema.`;
      out = { ...out, notes: [...out.notes, note] };
    }
    return out;
  }

  /** The type from `const`, `enum` or `type` (given or implied by the keywords used). */
  private base(schema: Record<string, unknown>, path: string, depth: number, indent: string, isRoot: boolean): Out | undefined {
    if ("const" in schema) return literal(schema.const);
    if (Array.isArray(schema.enum)) {
      if (schema.enum.length <= MAX_ENUM) return union(schema.enum.map((v) => literal(v)));
      // Too many to list compactly: the JSON types of the values, which only widens.
      const kinds = union(schema.enum.map(jsonKind));
      return { ...kinds, notes: [`One of ${schema.enum.length} allowed values (too many to list here).`] };
    }
    let types: unknown[] = [];
    if (typeof schema.type === "string") types = [schema.type];
    else if (Array.isArray(schema.type) && schema.type.length > 0) types = [...new Set(schema.type)];
    else {
      if (OBJECT_KEYWORDS.some((k) => k in schema)) types.push("object");
      if (ARRAY_KEYWORDS.some((k) => k in schema)) types.push("array");
    }
    if (types.length === 0) return undefined;
    return union(
      types.map((t) => {
        switch (t) {
          case "string":
            return prim("string");
          case "number":
          case "integer":
            return prim("number");
          case "boolean":
            return prim("boolean");
          case "null":
            return prim("null");
          case "object":
            return this.object(schema, path, depth, indent, isRoot);
          case "array":
            return this.array(schema, path, depth, indent);
          default:
            return this.unknown(`${path}/type`, `type ${JSON.stringify(t) ?? "?"}`);
        }
      }),
    );
  }

  private object(schema: Record<string, unknown>, path: string, depth: number, indent: string, isRoot: boolean): Out {
    const inner = indent + STEP;
    const props = isRecord(schema.properties) ? schema.properties : {};
    const required = new Set(Array.isArray(schema.required) ? schema.required.filter((r): r is string => typeof r === "string") : []);
    const entries: { doc: string[]; text: string }[] = [];
    const valueTypes: Out[] = [];
    let anyOptional = false;
    this.guard++;
    try {
      for (const key of Object.keys(props)) {
        const sub = this.node(props[key], `${path}/properties/${pointerSegment(key)}`, depth + 1, inner);
        const optional = !required.has(key);
        anyOptional ||= optional;
        const doc = [...(isRoot && !this.rootPropertyDocs ? [] : schemaDocLines(props[key])), ...sub.notes];
        entries.push({ doc, text: `${propertyKey(key)}${optional ? "?" : ""}: ${sub.text}` });
        valueTypes.push(sub);
      }
      const ap = schema.additionalProperties;
      const pp = isRecord(schema.patternProperties) ? schema.patternProperties : {};
      const patterns = Object.keys(pp);
      const index: Out[] = patterns.map((p) => this.node(pp[p], `${path}/patternProperties/${pointerSegment(p)}`, depth + 1, inner));
      if (ap === true) index.push(prim("unknown"));
      else if (ap !== undefined && ap !== false) index.push(this.node(ap, `${path}/additionalProperties`, depth + 1, inner));
      for (const key of required) {
        if (Object.hasOwn(props, key)) continue;
        const t = index.length > 0 ? union(index) : prim("unknown");
        entries.push({ doc: [], text: `${propertyKey(key)}: ${t.text}` });
        valueTypes.push(t);
      }
      if (ap === undefined && entries.length === 0 && patterns.length === 0) index.push(prim("unknown"));

      if (index.length > 0) {
        // Declared properties must fit the index signature: widen it by their types.
        let value = union([...index, ...valueTypes, ...(anyOptional ? [prim("undefined")] : [])]);
        if (value.text.includes("\n") || value.text.length > 120) value = prim("unknown");
        const shown = (o: Out): string => (o.text !== "unknown" && !o.text.includes("\n") && o.text.length <= 120 ? ` hold ${o.text}` : "");
        const doc = patterns.map((p, i) => `Keys matching /${p}/${shown(index[i] as Out)}.`);
        const other = index[patterns.length];
        if (other && (patterns.length > 0 || value.text !== other.text) && shown(other)) doc.push(`Other keys${shown(other)}.`);
        entries.push({ doc: [...doc, ...merge(index)], text: `[key: string]: ${value.text}` });
      } else if (entries.length === 0) {
        entries.push({ doc: [], text: "[key: string]: never" });
      }
    } finally {
      this.guard--;
    }
    const single = entries.map((e) => e.text).join("; ");
    if (entries.every((e) => e.doc.length === 0) && !single.includes("\n") && single.length + indent.length <= 100) {
      return prim(`{ ${single} }`);
    }
    const body = entries.map((e) => `${docBlock(e.doc, inner)}${inner}${e.text};\n`).join("");
    return prim(`{\n${body}${indent}}`);
  }

  private array(schema: Record<string, unknown>, path: string, depth: number, indent: string): Out {
    this.guard++;
    try {
      const tuple = Array.isArray(schema.prefixItems)
        ? { items: schema.prefixItems, key: "prefixItems", rest: schema.items, restKey: "items" }
        : Array.isArray(schema.items)
          ? { items: schema.items, key: "items", rest: schema.additionalItems, restKey: "additionalItems" }
          : undefined;
      if (!tuple) {
        if (schema.items === false) return prim("[]");
        if (schema.items === undefined || schema.items === true) return prim("unknown[]");
        const item = this.node(schema.items, `${path}/items`, depth + 1, indent);
        // A documented (multi-line) element reads better as Array<...> than as `}[]`.
        const text = item.text.includes("\n") ? `Array<${item.text}>` : `${paren(item, PRIMARY)}[]`;
        return { text, prec: PRIMARY, notes: item.notes };
      }
      const min = typeof schema.minItems === "number" && schema.minItems > 0 ? schema.minItems : 0;
      // maxItems at or below the tuple's length closes it (no rest) and drops the positions past it.
      const max = typeof schema.maxItems === "number" && schema.maxItems >= 0 ? Math.floor(schema.maxItems) : Number.POSITIVE_INFINITY;
      const closed = tuple.rest === false || max <= tuple.items.length;
      const outs = tuple.items.slice(0, max).map((s, i) => this.node(s, `${path}/${tuple.key}/${i}`, depth + 1, indent));
      const elements = outs.map((o, i) => (i < min ? o.text : `${paren(o, PRIMARY)}?`));
      const notes = merge(outs);
      if (!closed) {
        const rest = tuple.rest === undefined || tuple.rest === true ? prim("unknown") : this.node(tuple.rest, `${path}/${tuple.restKey}`, depth + 1, indent);
        elements.push(`...${paren(rest, PRIMARY)}[]`);
        notes.push(...rest.notes.filter((n) => !notes.includes(n)));
      }
      return { text: `[${elements.join(", ")}]`, prec: PRIMARY, notes };
    } finally {
      this.guard--;
    }
  }

  private ref(ref: string, path: string): Out {
    if (!ref.startsWith("#")) return this.unknown(path, `$ref to another document (${ref})`);
    let pointer: string;
    try {
      pointer = decodeURIComponent(ref.slice(1));
    } catch {
      return this.unknown(path, `malformed $ref ${ref}`);
    }
    if (pointer !== "" && !pointer.startsWith("/")) return this.unknown(path, `$ref to an anchor (${ref})`);
    if (resolvePointer(this.root, pointer) === undefined) return this.unknown(path, `unresolvable $ref (${ref})`);
    let alias = this.aliases.get(pointer);
    if (!alias) {
      if (this.aliases.size >= MAX_ALIASES) return this.unknown(path, `more than ${MAX_ALIASES} referenced definitions`);
      alias = { name: this.aliasName(pointer), pointer, body: "unknown", doc: [], unguarded: new Set() };
      this.aliases.set(pointer, alias);
      this.queue.push(alias);
    }
    if (this.current && this.guard === 0) this.current.unguarded.add(pointer);
    return prim(alias.name);
  }

  private aliasName(pointer: string): string {
    const segments = pointer
      .split("/")
      .slice(1)
      .map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"));
    if (segments[0] === "$defs" || segments[0] === "definitions") segments.shift();
    const stem = `${this.prefix}_${identifierPart(segments.join("_")) || "Root"}`;
    let name = stem;
    for (let k = 2; this.used.has(name); k++) name = `${stem}_${k}`;
    this.used.add(name);
    return name;
  }

  /** Generate every queued alias body (bodies may queue more). */
  drain(indent: string): void {
    for (let alias = this.queue.shift(); alias; alias = this.queue.shift()) {
      const target = resolvePointer(this.root, alias.pointer);
      this.current = alias;
      this.guard = 0;
      const out = this.node(target, `#${alias.pointer}`, 0, indent, alias.pointer === "");
      this.current = undefined;
      alias.body = out.text;
      alias.doc = [...schemaDocLines(target), ...out.notes];
    }
    this.breakBareCycles();
  }

  /** TypeScript refuses aliases that reach themselves with no object or array between. */
  private breakBareCycles(): void {
    const inCycle = (start: string): boolean => {
      const seen = new Set<string>();
      const stack = [...(this.aliases.get(start)?.unguarded ?? [])];
      for (let p = stack.pop(); p !== undefined; p = stack.pop()) {
        if (p === start) return true;
        if (seen.has(p)) continue;
        seen.add(p);
        stack.push(...(this.aliases.get(p)?.unguarded ?? []));
      }
      return false;
    };
    const cyclic = [...this.aliases.keys()].filter(inCycle);
    for (const pointer of cyclic) {
      const alias = this.aliases.get(pointer);
      if (!alias) continue;
      this.warnings.push(`#${pointer}: a reference cycle with no object or array in between is not represented`);
      alias.body = "unknown";
      alias.doc = [...alias.doc, "Warning: a reference cycle with no object or array in between is not represented; typed as unknown."];
    }
  }
}

function jsonKind(value: unknown): Out {
  if (value === null) return prim("null");
  if (Array.isArray(value)) return prim("unknown[]");
  switch (typeof value) {
    case "string":
      return prim("string");
    case "number":
      return prim("number");
    case "boolean":
      return prim("boolean");
    case "object":
      return prim("{ [key: string]: unknown }");
    default:
      return prim("unknown");
  }
}

function literal(value: unknown): Out {
  const text = literalType(value);
  return { text, prec: PRIMARY, notes: [] };
}

/** Generate the TypeScript type (and named aliases for referenced definitions) of a JSON Schema. */
export function schemaToType(schema: unknown, options: SchemaToTypeOptions): SchemaToTypeResult {
  const indent = options.indent ?? "";
  const gen = new Generator(schema, options.aliasPrefix, options.usedNames ?? new Set(), options.rootPropertyDocs ?? true, options.maxDepth ?? 32);
  const out = gen.node(schema, "#", 0, indent, true);
  gen.drain(indent);
  const rootAlias = gen.aliases.get("");
  const aliases = [...gen.aliases.values()].map((a) => `${docBlock(a.doc, indent)}${indent}type ${a.name} = ${a.body};`);
  if (rootAlias) return { type: rootAlias.name, aliases, warnings: gen.warnings };
  const type = out.notes.length > 0 ? `/** ${escapeComment(out.notes.join(" "))} */ ${out.text}` : out.text;
  return { type, aliases, warnings: gen.warnings };
}

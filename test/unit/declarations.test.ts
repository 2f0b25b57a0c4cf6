/**
 * The declaration generators on their own: identifier mapping (spec 6.1), JSON Schema →
 * TypeScript (spec 6.2: every feature compiles under strict, accepts valid values and
 * refuses invalid ones via `@ts-expect-error`), and the rendered `mcp/*.d.ts` files.
 */
import { describe, expect, it } from "vitest";
import { assignIdentifiers, isSafeIdentifier, MCP_MEMBER_RESERVED, MCP_SERVER_RESERVED } from "../../src/shared/declarations/identifiers.js";
import { schemaToType } from "../../src/shared/declarations/schema-to-ts.js";
import { renderIndexFile, renderServerFile, renderToolDeclarations, type McpServerDecl, type McpToolDecl } from "../../src/sandbox/catalog/mcp-api-files.js";
import { typecheck } from "../helpers/typecheck.js";

const STRICTER = { exactOptionalPropertyTypes: true, noUncheckedIndexedAccess: true };

/** Generate `schema`'s type, then prove every `valid` value is accepted and every `invalid` one refused. */
function check(schema: unknown, valid: string[], invalid: string[] = []) {
  const r = schemaToType(schema, { aliasPrefix: "T" });
  const lines = [...r.aliases, `type Subject = ${r.type};`];
  for (const [i, v] of valid.entries()) lines.push(`export const ok${i}: Subject = ${v};`);
  for (const [i, v] of invalid.entries()) lines.push(`// @ts-expect-error invalid ${i}`, `export const bad${i}: Subject = ${v};`);
  const source = lines.join("\n");
  expect(typecheck({ "t.ts": source }), source).toEqual([]);
  expect(typecheck({ "t.ts": source }, STRICTER), source).toEqual([]);
  return { ...r, source };
}

function shuffle<T>(items: readonly T[], seed: number): T[] {
  const out = [...items];
  let s = seed;
  for (let i = out.length - 1; i > 0; i--) {
    s = (s * 1103515245 + 12345) % 2147483648;
    const j = s % (i + 1);
    [out[i], out[j]] = [out[j] as T, out[i] as T];
  }
  return out;
}

describe("assignIdentifiers (spec 6.1)", () => {
  it("camel style: splits on separators, lower-cases the first word, capitalises the rest", () => {
    const cases: Record<string, string> = {
      create_issue: "createIssue",
      take_snapshot: "takeSnapshot",
      "chrome-devtools": "chromeDevtools",
      getFile: "getFile",
      GetFile: "getFile",
      "list.items": "listItems",
      API_call: "apiCall",
      get_URL: "getUrl",
      echo: "echo",
      "get file now": "getFileNow",
      "a/b:c": "aBC",
      __secret__: "secret",
      __private__: "private_",
      "x-2fa": "x2fa",
      héllo_wörld: "hélloWörld",
    };
    for (const [name, id] of Object.entries(cases)) expect(assignIdentifiers([name], "camel").get(name), name).toBe(id);
  });

  it("export style: illegal characters become _", () => {
    const cases: Record<string, string> = { "get-file": "get_file", "a b.c": "a_b_c", create_issue: "create_issue", $x: "$x", "a/b": "a_b", "!!": "__" };
    for (const [name, id] of Object.entries(cases)) expect(assignIdentifiers([name], "export").get(name), name).toBe(id);
  });

  it("both styles: leading digit gets _, reserved words and caller-reserved names get _ appended, empty becomes _", () => {
    for (const style of ["camel", "export"] as const) {
      expect(assignIdentifiers(["123tool"], style).get("123tool")).toBe("_123tool");
      for (const w of ["delete", "class", "new", "await", "yield", "let", "static", "enum"]) expect(assignIdentifiers([w], style).get(w)).toBe(`${w}_`);
      expect(assignIdentifiers([""], style).get("")).toBe("_");
      expect(assignIdentifiers(["then"], style, MCP_MEMBER_RESERVED).get("then")).toBe("then_");
    }
    expect(assignIdentifiers(["---"], "camel").get("---")).toBe("_");
    const members = assignIdentifiers(["$api", "resources", "prompts", "to_string", "constructor", "__proto__", "to-json"], "camel", MCP_MEMBER_RESERVED);
    expect([...members]).toEqual([
      ["$api", "$api_"],
      ["__proto__", "proto"],
      ["constructor", "constructor_"],
      ["prompts", "prompts_"],
      ["resources", "resources_"],
      ["to-json", "toJson"],
      ["to_string", "toString_"],
    ]);
    expect(assignIdentifiers(["__proto__"], "export", MCP_SERVER_RESERVED).get("__proto__")).toBe("__proto___");
    expect(assignIdentifiers(["then", "value_of"], "camel", MCP_SERVER_RESERVED).get("value_of")).toBe("valueOf_");
  });

  it("collisions: alphabetical by canonical name, first keeps the clean name, later get __2, __3", () => {
    const ids = assignIdentifiers(["create_issue", "createIssue", "create-issue"], "camel");
    expect(Object.fromEntries(ids)).toEqual({ "create-issue": "createIssue", createIssue: "createIssue__2", create_issue: "createIssue__3" });
    expect([...ids.keys()]).toEqual(["create-issue", "createIssue", "create_issue"]);
    // A name whose clean identifier is itself "x__2" keeps it; the collision skips to __3.
    expect(Object.fromEntries(assignIdentifiers(["a.b", "a-b", "a_b__2"], "export"))).toEqual({ "a-b": "a_b", "a.b": "a_b__3", a_b__2: "a_b__2" });
  });

  it("is deterministic under shuffled input and maps duplicates once", () => {
    const names = ["b", "a-b", "a_b", "A_B", "a b", "2x", "_2x", "class", "class_", "x", "x", "getFile", "get_file", "get-file", "GET_FILE"];
    const expected = [...assignIdentifiers(names, "camel", MCP_MEMBER_RESERVED)];
    for (let seed = 1; seed < 20; seed++) expect([...assignIdentifiers(shuffle(names, seed), "camel", MCP_MEMBER_RESERVED)]).toEqual(expected);
    expect(expected.length).toBe(new Set(names).size);
    const ids = expected.map(([, id]) => id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect(isSafeIdentifier(id), id).toBe(true);
  });

  it("always yields identifiers that compile as declarations", () => {
    const names = ["default", "0", "9lives", "a--b", "ümlaut-tool", "😀", "x y z", "$", "_", "arguments", "eval", "implements"];
    for (const style of ["camel", "export"] as const) {
      const ids = [...assignIdentifiers(names, style).values()];
      const src = ids.map((id) => `declare function ${id}(): void;`).join("\n");
      expect(typecheck({ "ids.ts": `${src}\nexport {};` }), src).toEqual([]);
    }
  });
});

describe("schemaToType (spec 6.2)", () => {
  it("primitive types, integer, type arrays", () => {
    expect(check({ type: "string" }, ['"x"'], ["1"]).type).toBe("string");
    expect(check({ type: "integer" }, ["1"], ['"1"']).type).toBe("number");
    expect(check({ type: "boolean" }, ["true"], ["null"]).type).toBe("boolean");
    expect(check({ type: "null" }, ["null"], ["0"]).type).toBe("null");
    expect(check({ type: ["string", "null"] }, ['"x"', "null"], ["1"]).type).toBe("string | null");
    check({ type: ["array", "object"], items: { type: "number" }, properties: { a: { type: "string" } } }, ["[1]", '{ a: "x" }'], ['["x"]', "{ a: 1 }"]);
  });

  it("enum and const, escaped", () => {
    const r = check({ enum: ["a", 'quo"te\n', 1, -2.5, true, null] }, ['"a"', '"quo\\"te\\n"', "-2.5", "null"], ['"b"', "false", "2"]);
    expect(r.type).toBe('"a" | "quo\\"te\\n" | 1 | -2.5 | true | null');
    expect(check({ const: "fixed" }, ['"fixed"'], ['"other"']).type).toBe('"fixed"');
    check({ const: { kind: "x", n: [1, 2] } }, ['{ kind: "x", n: [1, 2] }'], ['{ kind: "y", n: [1, 2] }']);
    check({ type: "string", enum: [] }, [], ['"x"']);
  });

  it("oneOf/anyOf as unions, allOf as intersections, OpenAPI nullable", () => {
    check({ oneOf: [{ type: "string" }, { type: "number" }] }, ['"a"', "1"], ["true"]);
    check(
      {
        anyOf: [
          { type: "object", properties: { a: { type: "string" } }, required: ["a"] },
          { type: "array", items: { type: "string" } },
        ],
      },
      ['{ a: "x" }', '["x"]'],
      ["{ a: 1 }"],
    );
    check(
      {
        allOf: [
          { type: "object", properties: { a: { type: "string" } }, required: ["a"] },
          { properties: { b: { type: "number" } }, required: ["b"] },
        ],
      },
      ['{ a: "x", b: 1 }'],
      ['{ a: "x" }'],
    );
    check({ type: "string", nullable: true }, ["null", '"x"'], ["1"]);
    check({ type: "object", properties: { a: { type: "integer", nullable: true } }, required: ["a"] }, ["{ a: null }", "{ a: 1 }"], ['{ a: "1" }']);
    // A required-only branch tightens the base object.
    check(
      { type: "object", properties: { a: { type: "string" }, b: { type: "string" } }, oneOf: [{ required: ["a"] }, { required: ["b"] }] },
      ['{ a: "x" }', '{ b: "y" }'],
      ["{ a: 1 }"],
    );
  });

  it("$ref to $defs and definitions, recursive, with named aliases", () => {
    const tree = {
      $ref: "#/$defs/Node",
      $defs: {
        Node: {
          type: "object",
          description: "A tree node",
          properties: { value: { type: "number" }, children: { type: "array", items: { $ref: "#/$defs/Node" } }, meta: { $ref: "#/definitions/Meta" } },
          required: ["value"],
        },
      },
      definitions: { Meta: { type: "object", properties: { tag: { type: "string" } } } },
    };
    const r = check(
      tree,
      ["{ value: 1, children: [{ value: 2, children: [] }] }", '{ value: 1, meta: { tag: "t" } }'],
      ['{ value: 1, children: [{ value: "2" }] }', "{ children: [] }"],
    );
    expect(r.type).toBe("T_Node");
    expect(r.aliases.join("\n")).toContain("type T_Node = ");
    expect(r.aliases.join("\n")).toContain("type T_Meta = ");
    expect(r.aliases.join("\n")).toContain("/** A tree node */");
    // Root recursion through "#", and mutual recursion.
    check(
      { type: "object", properties: { name: { type: "string" }, next: { $ref: "#" } }, required: ["name"] },
      ['{ name: "a", next: { name: "b" } }'],
      ['{ name: "a", next: { name: 1 } }'],
    );
    check(
      { $defs: { A: { type: "object", properties: { b: { $ref: "#/$defs/B" } } }, B: { type: "array", items: { $ref: "#/$defs/A" } } }, $ref: "#/$defs/A" },
      ["{ b: [{ b: [] }] }"],
      ["{ b: [{ b: 1 }] }"],
    );
    // Escaped pointers and odd definition names.
    const odd = check(
      { type: "object", properties: { x: { $ref: "#/$defs/a~1b%20c" } }, $defs: { "a/b c": { type: "string" } } },
      ['{ x: "s" }'],
      ["{ x: 1 }"],
    );
    expect(odd.aliases.join("\n")).toContain("type T_a_b_c = string;");
  });

  it("a reference cycle with no object or array in between becomes unknown with a warning", () => {
    const r = check({ $defs: { A: { anyOf: [{ $ref: "#/$defs/A" }, { type: "string" }] } }, $ref: "#/$defs/A" }, ['"x"', "1"]);
    expect(r.aliases.join("\n")).toContain("Warning: a reference cycle");
    expect(r.warnings.length).toBeGreaterThan(0);
  });

  it("additionalProperties false / true / schema, with and without declared properties", () => {
    check({ type: "object", properties: { a: { type: "string" } }, additionalProperties: false }, ['{ a: "x" }', "{}"], ['{ a: "x", b: 1 }']);
    check({ type: "object", properties: { a: { type: "string" } }, additionalProperties: true }, ['{ a: "x", b: 1 }'], ["{ a: 1 }"]);
    const withSchema = check(
      { type: "object", properties: { a: { type: "string" }, n: { type: "boolean" } }, required: ["a"], additionalProperties: { type: "number" } },
      ['{ a: "x", other: 1 }', '{ a: "x", n: true }'],
      ["{ a: 1 }", "{ other: 1 }"],
    );
    expect(withSchema.type).toContain("[key: string]: number | string | boolean | undefined;");
    expect(withSchema.type).toContain("Other keys hold number.");
    check({ type: "object", additionalProperties: { type: "number" } }, ["{ x: 1, y: 2 }", "{}"], ['{ x: "1" }']);
    check({ type: "object", additionalProperties: false }, ["{}"], ["{ a: 1 }"]);
    check({ type: "object" }, ["{ any: 1 }", "{}"], ['"string"']);
  });

  it("patternProperties as an index signature (union of the patterns' schemas)", () => {
    const r = check(
      { type: "object", patternProperties: { "^s_": { type: "string" }, "^n_": { type: "number" } }, additionalProperties: false },
      ['{ s_a: "x", n_b: 1 }'],
      ["{ s_a: true }"],
    );
    expect(r.type).toContain("Keys matching /^s_/ hold string.");
    expect(r.type).toContain("Keys matching /^n_/ hold number.");
    check(
      { type: "object", properties: { id: { type: "string" } }, required: ["id"], patternProperties: { "^x-": { type: "number" } } },
      ['{ id: "a", "x-rate": 2 }'],
      ['{ id: "a", "x-rate": true }'],
    );
  });

  it("tuples: prefixItems and draft-07 items arrays, closed or open, minItems", () => {
    const closed = check(
      { type: "array", prefixItems: [{ type: "string" }, { type: "number" }], items: false, minItems: 2 },
      ['["a", 1]'],
      ['["a"]', '["a", 1, 2]', '[1, "a"]'],
    );
    expect(closed.type).toBe("[string, number]");
    check({ type: "array", prefixItems: [{ type: "string" }, { type: ["number", "null"] }] }, ["[]", '["a"]', '["a", null, "extra"]'], ["[1]"]);
    check(
      { type: "array", items: [{ type: "string" }, { type: "boolean" }], additionalItems: false, minItems: 1 },
      ['["a"]', '["a", true]'],
      ["[]", '["a", true, 1]'],
    );
    check({ type: "array", items: [{ type: "string" }], additionalItems: { type: "number" } }, ['["a", 1, 2]'], ['["a", "b"]']);
    check({ type: "array", items: [{ type: "string" }] }, ['["a", {}, 3]'], ["[1]"]);
  });

  it("a tuple closes at maxItems, in both spellings; minItems below its length makes the rest optional", () => {
    // Draft-07: items array with no additionalItems, closed by maxItems alone.
    const draft07 = check(
      { type: "array", items: [{ type: "string" }, { type: "number" }], minItems: 2, maxItems: 2 },
      ['["a", 1]'],
      ['["a"]', '["a", 1, 2]', '["a", 1, "x"]', '[1, "a"]'],
    );
    expect(draft07.type).toBe("[string, number]");
    // Draft 2020-12: prefixItems with no items keyword, closed by maxItems alone.
    const prefix = check(
      { type: "array", prefixItems: [{ type: "string" }, { type: "number" }], minItems: 2, maxItems: 2 },
      ['["a", 1]'],
      ['["a"]', '["a", 1, 2]', '[1, "a"]'],
    );
    expect(prefix.type).toBe("[string, number]");
    // maxItems wins over a rest schema: no element can reach it.
    const restSchema = check(
      { type: "array", prefixItems: [{ type: "string" }, { type: "number" }], items: { type: "boolean" }, minItems: 2, maxItems: 2 },
      ['["a", 1]'],
      ['["a", 1, true]'],
    );
    expect(restSchema.type).toBe("[string, number]");
    expect(
      check({ type: "array", items: [{ type: "string" }], additionalItems: { type: "number" }, minItems: 1, maxItems: 1 }, ['["a"]'], ['["a", 1]']).type,
    ).toBe("[string]");
    // minItems below the length: the elements past it are optional, and the tuple stays closed.
    const optional = check(
      { type: "array", items: [{ type: "string" }, { type: "number" }], minItems: 1, maxItems: 2 },
      ['["a"]', '["a", 1]'],
      ["[]", '["a", 1, 2]', '["a", "b"]'],
    );
    expect(optional.type).toBe("[string, number?]");
    expect(check({ type: "array", prefixItems: [{ type: "string" }, { type: "number" }], items: false, minItems: 1 }, ['["a"]'], ['["a", 1, 2]']).type).toBe(
      "[string, number?]",
    );
    expect(
      check({ type: "array", prefixItems: [{ type: "string" }, { type: "number" }], maxItems: 2 }, ["[]", '["a"]', '["a", 1]'], ['["a", 1, 2]']).type,
    ).toBe("[string?, number?]");
    // maxItems below the length drops the positions past it; 0 leaves the empty tuple.
    expect(
      check({ type: "array", items: [{ type: "string" }, { type: "number" }, { type: "boolean" }], maxItems: 1 }, ["[]", '["a"]'], ['["a", 1]']).type,
    ).toBe("[string?]");
    expect(check({ type: "array", prefixItems: [{ type: "string" }], maxItems: 0 }, ["[]"], ['["a"]']).type).toBe("[]");
    // maxItems above the length leaves the tuple open, as before (wider than the schema, never narrower).
    expect(check({ type: "array", items: [{ type: "string" }], minItems: 1, maxItems: 3 }, ['["a", 1, 2]'], ["[1]"]).type).toBe("[string, ...unknown[]]");
  });

  it("items schemas as T[], required vs optional, names that are not identifiers", () => {
    const r = check(
      {
        type: "object",
        properties: {
          tags: { type: "array", items: { anyOf: [{ type: "string" }, { type: "number" }] } },
          "foo-bar": { type: "string" },
          "with space": { type: "number" },
          "0": { type: "boolean" },
          __proto__x: { type: "string" },
        },
        required: ["foo-bar", "missing"],
      },
      ['{ "foo-bar": "a", missing: 1, tags: ["x", 1] }'],
      ['{ tags: ["x"], missing: 1 }', '{ "foo-bar": "a" }', '{ "foo-bar": "a", missing: 1, tags: [true] }'],
    );
    expect(r.type).toContain('"foo-bar": string');
    expect(r.type).toContain('"with space"?: number');
    expect(r.type).toContain("(string | number)[]");
    check({ type: "array" }, ["[1, 'a']"], ["{}"]);
    // Keys that are special on JavaScript objects stay plain properties.
    const special = JSON.parse(
      '{"type":"object","properties":{"__proto__":{"type":"string"},"constructor":{"type":"number"}},"required":["__proto__","toString"]}',
    ) as unknown;
    expect(check(special, ['{ ["__proto__"]: "x", constructor: 1, toString: 1 }'], ['{ ["__proto__"]: 1, constructor: 1, toString: 1 }']).type).toBe(
      "{ __proto__: string; constructor?: number; toString: unknown }",
    );
  });

  it("JSDoc from description, default, format, examples, deprecated; */ can never close a comment", () => {
    const r = check(
      {
        type: "object",
        properties: {
          path: { type: "string", description: "Where */ it goes\nsecond line", default: "/tmp", format: "uri", examples: ["/a", "/b", "/c"] },
          old: { type: "string", deprecated: true, description: "Use path. */ declare const injected: number; /*" },
        },
      },
      ['{ path: "x" }'],
      ["{ path: 1 }"],
    );
    expect(r.type).toContain("Where *\\/ it goes");
    expect(r.type).toContain('@default "/tmp"');
    expect(r.type).toContain("@format uri");
    expect(r.type).toContain('@example "/b"');
    expect(r.type).not.toContain('"/c"');
    expect(r.type).toContain("@deprecated");
    expect(r.type).not.toContain("it goes */");
    const after = typecheck({ "t.ts": `type X = ${r.type};\nexport const v: X = {};\nexport const w = injected;` });
    expect(after.join("\n")).toContain("Cannot find name 'injected'");
  });

  it("boolean schemas and {}", () => {
    expect(check(true, ["1", '"x"', "null"]).type).toBe("unknown");
    expect(check({}, ["1"]).type).toBe("unknown");
    expect(check(false, [], ["1", "null"]).type).toBe("never");
    check({ type: "object", properties: { never: false, any: true }, required: ["any"] }, ["{ any: 1 }"], ["{ any: 1, never: 1 }"]);
  });

  it("unrepresentable features: unknown (or a widened type) with a Warning doc comment", () => {
    const not = check({ not: { type: "string" } }, ["1", '"x"']);
    expect(not.type).toBe("/** Warning: not is not represented; typed as unknown. */ unknown");
    expect(not.warnings).toEqual(["#: not is not represented"]);
    const inProp = check(
      {
        type: "object",
        properties: { a: { if: { type: "string" }, then: { minLength: 1 }, else: { type: "number" } }, b: { $ref: "other.json#/x" }, c: { type: "decimal" } },
      },
      ["{ a: 1, b: 2, c: 3 }"],
    );
    expect(inProp.type).toContain("Warning: if/then/else is not represented; typed as unknown.");
    expect(inProp.type).toContain("Warning: $ref to another document (other.json#/x) is not represented; typed as unknown.");
    expect(inProp.type).toContain('Warning: type "decimal" is not represented; typed as unknown.');
    expect(inProp.warnings).toHaveLength(3);
    const widened = check({ type: "string", not: { const: "x" } }, ['"y"'], ["1"]);
    expect(widened.type).toContain("the type may accept more than the schema");
    const anchors = check({ type: "object", properties: { a: { $ref: "#missing" }, b: { $ref: "#/$defs/nope" } } }, ["{ a: 1, b: 2 }"]);
    expect(anchors.warnings).toHaveLength(2);
  });

  it("odd inputs stay valid TypeScript: line separators, huge enums, deep const, $ref with nullable", () => {
    const ls = "a\u2028b\u2029c";
    const odd = check(
      { type: "object", properties: { [ls]: { enum: [ls, "x"], description: `doc ${ls} */ end` } } },
      [`{ ${JSON.stringify(ls)}: "x" }`],
      [`{ ${JSON.stringify(ls)}: "y" }`],
    );
    expect(odd.type).toContain("*\\/ end");
    const many = check(
      { type: "object", properties: { code: { enum: Array.from({ length: 500 }, (_, i) => `c${i}`) } } },
      ['{ code: "c499" }'],
      ["{ code: 1 }"],
    );
    expect(many.type).toContain("One of 500 allowed values");
    expect(many.type.length).toBeLessThan(200);
    let deep: unknown = 1;
    for (let i = 0; i < 100; i++) deep = [deep];
    check({ const: deep }, [`${"[".repeat(100)}1${"]".repeat(100)}`], ["[1]"]);
    check(
      { type: "object", properties: { n: { $ref: "#/$defs/N", nullable: true } }, $defs: { N: { type: "number" } } },
      ["{ n: null }", "{ n: 1 }"],
      ['{ n: "1" }'],
    );
  });

  it("caps nesting depth", () => {
    let deep: unknown = { type: "string" };
    for (let i = 0; i < 60; i++) deep = { type: "object", properties: { d: deep } };
    const r = check(deep, ["{ d: { d: {} } }"]);
    expect(r.warnings.some((w) => w.includes("nesting deeper than 32 levels"))).toBe(true);
    expect(r.type).toContain("Warning: nesting deeper than 32 levels is not represented");
  });

  it("alias prefixes and usedNames keep two tools' definitions apart", () => {
    const used = new Set<string>();
    const a = schemaToType({ $ref: "#/$defs/Item", $defs: { Item: { type: "string" } } }, { aliasPrefix: "A", usedNames: used });
    const b = schemaToType({ $ref: "#/$defs/Item", $defs: { Item: { type: "number" } } }, { aliasPrefix: "A", usedNames: used });
    expect([a.type, b.type]).toEqual(["A_Item", "A_Item_2"]);
    const src = [...a.aliases, ...b.aliases, `export const x: ${a.type} = "s";`, `export const y: ${b.type} = 1;`].join("\n");
    expect(typecheck({ "t.ts": src })).toEqual([]);
  });
});

const SERVER: McpServerDecl = {
  key: "docs",
  name: "docs-server",
  title: "Docs",
  version: "1.2.3",
  description: "Project documentation. Search and read pages.",
  instructions: `Prefer search before read. ${"x".repeat(3000)} */ declare const injected: 1; /*`,
  resources: true,
  prompts: true,
};

const TOOLS: McpToolDecl[] = [
  {
    id: "mcp:docs-server:search_pages",
    name: "search_pages",
    functionName: "searchPages",
    description: "Search pages by text.",
    inputSchema: {
      type: "object",
      properties: { query: { type: "string", description: "Words to find" }, limit: { type: "integer", default: 10 }, "sort-by": { enum: ["score", "date"] } },
      required: ["query"],
    },
    outputSchema: {
      type: "object",
      properties: { hits: { type: "array", items: { $ref: "#/$defs/Hit" } } },
      required: ["hits"],
      $defs: { Hit: { type: "object", properties: { id: { type: "string" }, score: { type: "number" } }, required: ["id", "score"] } },
    },
    annotations: { title: "Search pages", readOnlyHint: true, destructiveHint: false, openWorldHint: false },
    examples: [{ query: "install" }, { query: "*/ tricky", limit: 2 }, { query: "third" }],
  },
  {
    id: "mcp:docs-server:get_page",
    name: "get_page",
    functionName: "getPage",
    description: "Read one page (tree of sections).",
    inputSchema: { type: "object", properties: { id: { type: "string" } }, required: ["id"] },
    outputSchema: {
      $ref: "#/$defs/Section",
      $defs: {
        Section: {
          type: "object",
          properties: { title: { type: "string" }, sections: { type: "array", items: { $ref: "#/$defs/Section" } } },
          required: ["title"],
        },
      },
    },
  },
  {
    id: "mcp:docs-server:reindex",
    name: "reindex",
    functionName: "reindex",
    description: "Rebuild the index.",
    inputSchema: { type: "object", properties: {} },
    annotations: { destructiveHint: true, idempotentHint: true },
  },
  { id: "mcp:docs-server:weird", name: "weird", functionName: "weird", description: "", inputSchema: { not: {} } },
];

const USAGE = `
async function main(): Promise<void> {
  const found = await MCP.docs.searchPages({ query: "install", limit: 5, "sort-by": "date" });
  const hits: { id: string; score: number }[] = found.structuredContent?.hits ?? [];
  const page = await MCP.docs.getPage({ id: hits[0]?.id ?? "home" });
  const title: string | undefined = page.structuredContent?.sections?.[0]?.title;
  await MCP.docs.reindex();
  await MCP.docs.reindex({});
  await MCP.docs.weird(42);
  const header: McpApiHeader = await MCP.docs.$api("search_pages", { schema: true });
  const resources = await MCP.docs.resources.list();
  const read = await MCP.docs.resources.read({ uri: resources.resources[0]?.uri ?? "memo://x" });
  const prompt = await MCP.docs.prompts.get({ name: "brief", arguments: { topic: "release" } });
  const isError: boolean | undefined = found.isError;
  // @ts-expect-error query is required
  await MCP.docs.searchPages({ limit: 1 });
  // @ts-expect-error sort-by is an enum
  await MCP.docs.searchPages({ query: "q", "sort-by": "name" });
  // @ts-expect-error limit is a number
  await MCP.docs.searchPages({ query: "q", limit: "5" });
  // @ts-expect-error getPage takes an input
  await MCP.docs.getPage();
  // @ts-expect-error no such tool
  await MCP.docs.deletePage({ id: "x" });
  // @ts-expect-error resources.read needs a uri
  await MCP.docs.resources.read({});
  void [title, header, read, prompt, isError];
}
void main;
`;

describe("mcp API files", () => {
  const index = renderIndexFile([{ server: SERVER, tools: TOOLS }]);
  const file = renderServerFile(SERVER, TOOLS);

  it("index file: how to call, shared types, one line per server, no server declarations", () => {
    expect(index).toContain("virtual, read-only");
    expect(index).toContain("await MCP.<server>.<fn>({ ...input })");
    for (const t of ["McpToolResult<S = unknown>", "McpApiHeader", "McpResourceList", "McpResourceContents", "McpPromptList", "McpPrompt "])
      expect(index).toContain(`type ${t}`);
    expect(index).toContain('- MCP.docs (mcp/docs.d.ts, 4 tools + resources, prompts; MCP server "docs-server"): Project documentation.');
    expect(index).not.toContain("declare namespace");
    expect(renderIndexFile([])).toContain("(none)");
  });

  it("server file: $api, documented functions, aliases, resources and prompts, and it type-checks with usage", () => {
    expect(file.startsWith('/// <reference path="./index.d.ts" />\n')).toBe(true);
    expect(file).toContain("declare namespace MCP.docs {");
    expect(file).toContain("function $api(toolName?: string, options?: { schema?: boolean }): Promise<McpApiHeader>;");
    expect(file).toContain("@param input.query Words to find");
    expect(file).toContain("@param input.limit (default 10)");
    expect(file).toContain("@readOnly (destructiveHint: false, openWorldHint: false)");
    expect(file).toContain("@destructive @idempotent");
    expect(file).toContain("@title Search pages");
    expect(file).toContain('@example await MCP.docs.searchPages({"query":"install"})');
    expect(file).toContain('@example await MCP.docs.searchPages({"query":"*\\/ tricky","limit":2})');
    expect(file).not.toContain("third");
    expect(file).toContain('MCP tool "search_pages", catalog id mcp:docs-server:search_pages.');
    expect(file).toContain("function reindex(input?: { [key: string]: unknown }): Promise<McpToolResult>;");
    expect(file).toContain("function weird(input: /** Warning: not is not represented; typed as unknown. */ unknown)");
    expect(file).toContain("type SearchPagesOutput_Hit = ");
    expect(file).toContain("Promise<McpToolResult<GetPageOutput_Section>>");
    expect(file).toContain("namespace resources {");
    expect(file).toContain("namespace prompts {");
    expect(file).toContain("Instructions:\n * Prefer search before read.");
    expect(file.length).toBeLessThan(5000);
    const files = { "mcp/index.d.ts": index, "mcp/docs.d.ts": file, "usage.ts": USAGE };
    expect(typecheck(files)).toEqual([]);
    expect(typecheck(files, STRICTER)).toEqual([]);
    // The instructions' "*/" could not close the comment and declare a global.
    expect(typecheck({ ...files, "usage.ts": "export const v: number = injected;" }).join("\n")).toContain("Cannot find name 'injected'");
  });

  it("is deterministic and independent of tool order; servers without resources/prompts omit them", () => {
    expect(renderServerFile(SERVER, [...TOOLS].reverse())).toBe(file);
    expect(renderIndexFile([{ server: SERVER, tools: TOOLS }])).toBe(index);
    const plain = renderServerFile({ key: "plain", name: "plain", resources: false, prompts: false }, TOOLS.slice(2, 3));
    expect(plain).not.toContain("namespace resources");
    expect(plain).not.toContain("namespace prompts");
    expect(typecheck({ "mcp/index.d.ts": index, "mcp/plain.d.ts": plain })).toEqual([]);
  });

  it("renderToolDeclarations: one tool with its aliases, compiling on its own", () => {
    const one = renderToolDeclarations(SERVER, TOOLS[0] as McpToolDecl);
    expect(one.startsWith("declare namespace MCP.docs {\n")).toBe(true);
    expect(one).toContain("function searchPages(");
    expect(one).toContain("type SearchPagesOutput_Hit");
    expect(one).not.toContain("getPage");
    expect(typecheck({ "mcp/index.d.ts": index, "one.d.ts": one })).toEqual([]);
  });

  it("refuses identifiers that would break the file", () => {
    expect(() => renderServerFile({ ...SERVER, key: "bad-key" }, [])).toThrow(/not a safe identifier/);
    const tool = TOOLS[2] as McpToolDecl;
    expect(() => renderServerFile(SERVER, [{ ...tool, functionName: "delete" }])).toThrow(/function name/);
    expect(() => renderServerFile(SERVER, [{ ...tool, functionName: "resources" }])).toThrow(/function name/);
    expect(() => renderServerFile(SERVER, [tool, { ...tool, name: "other" }])).toThrow(/unique/);
  });
});

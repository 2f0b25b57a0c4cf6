/**
 * Code Mode for MCP spec section 6: MCP tool names to export identifiers (illegal
 * characters, leading digits, reserved words, `__N` collisions in name order, reflected in
 * `__meta__`), the `.d.ts` generated from the tools' JSON Schemas (each schema feature the
 * spec lists, and the `unknown` fallback with a warning), and tool annotations in doc
 * comments and discovery. Through `codemode mcp` over stdio.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fileURLToPath } from "node:url";
import { declarationsOf, standardServers, startStdioFront, type Front } from "../helpers/mcp-front.js";
import { typecheck } from "../helpers/typecheck.js";

let front: Front;
let decl = "";
let exportsOf: Record<string, string> = {};
/** Tool names catalog ids cannot hold: a slash, a space, a colon, non-ASCII, an emoji, ... */
const NAMES_SERVER = fileURLToPath(new URL("../fixtures/mcp-names-server.mjs", import.meta.url));
beforeAll(async () => {
  front = await startStdioFront({ ...standardServers(), names: { command: process.execPath, args: [NAMES_SERVER] } });
  decl = declarationsOf((await front.tool()).description ?? "");
  const r = await front.run(
    `import { __meta__ } from "@codemode/servers/fixture"; globalThis.__codemode_result__ = Object.fromEntries(__meta__.tools.map((t) => [t.toolName, t.exportName]));`,
  );
  exportsOf = r.result as Record<string, string>;
});
afterAll(async () => {
  await front?.close();
});

/** The declaration block of one fixture tool (doc comment, aliases and function). */
function block(exportName: string): string {
  const fixture = decl.slice(decl.indexOf('declare module "@codemode/servers/fixture"'));
  const fn = fixture.indexOf(`export function ${exportName}(`);
  const start = fixture.lastIndexOf("  /**", fn);
  const ends = ["\n  /**", "\n  type ", "\n  export const __meta__"].map((m) => fixture.indexOf(m, fn)).filter((i) => i >= 0);
  return fixture.slice(start, Math.min(...ends));
}

describe("spec 6.1: identifier mapping", () => {
  it("R6.1-1 characters illegal in identifiers become _", () => {
    expect(exportsOf["echo.v2"]).toBe("echo_v2");
    expect(exportsOf["json-text"]).toBe("json_text");
  });

  it("R6.1-2 an identifier starting with a digit gets a leading _", () => {
    expect(exportsOf["123tool"]).toBe("_123tool");
  });

  it("R6.1-3 a reserved word gets a trailing _", () => {
    expect(exportsOf.delete).toBe("delete_");
    expect(exportsOf.class).toBe("class_");
  });

  it("R6.1-4 names that still collide get __N from 2, the first keeping the clean name", () => {
    expect(exportsOf["get-item"]).toBe("get_item");
    expect(exportsOf.get_item).toBe("get_item__2");
    expect(exportsOf.__meta__).toBe("__meta___");
  });

  it("R6.1-5 collision order is deterministic: tools in alphabetical order of their canonical names, the same on every run", async () => {
    const again = await front.run(
      `import { listTools } from "@codemode/discovery"; globalThis.__codemode_result__ = (await listTools("fixture", { detail: "name" }));`,
    );
    const list = again.result as Array<{ toolName: string; exportName: string }>;
    const names = list.map((t) => t.toolName);
    expect(names).toEqual([...names].sort());
    expect(Object.fromEntries(list.map((t) => [t.toolName, t.exportName]))).toEqual(exportsOf);
  });

  it("R6.1-6 the mapping is reflected in __meta__ and the bindings", async () => {
    const r = await front.run(`
      import * as fx from "@codemode/servers/fixture";
      globalThis.__codemode_result__ = [await fx._123tool(), await fx.class_(), await fx.delete_({ id: "9" }), await fx.__meta___(), fx.__meta__.tools.every((t) => typeof fx[t.exportName] === "function")];`);
    expect(r.result).toEqual(["digits ok", "class ok", "deleted 9", "meta tool", true]);
  });

  it("R6.1-7 tool names with characters outside [A-Za-z0-9_.-] (slash, space, colon, non-ASCII, emoji) get legal export names and are callable", async () => {
    const r = await front.run(`
      import * as n from "@codemode/servers/names";
      const out = {};
      for (const t of n.__meta__.tools) out[t.toolName] = [t.exportName, await n[t.exportName](t.toolName === "get weather" ? { city: "Lima" } : {})];
      globalThis.__codemode_result__ = out;`);
    expect(r.diagnostics).toEqual([]);
    expect(r.result).toEqual({
      "1st/place": ["_1st_place", "called 1st/place"],
      "_u.legal": ["_u_legal", "called _u.legal"],
      "files/read": ["files_read", "called files/read"],
      files_read: ["files_read__2", "called files_read"],
      "get weather": ["get_weather", "called get weather for Lima"],
      météo: ["météo", "called météo"],
      "new!": ["new_", "called new!"],
      "ns:lookup": ["ns_lookup", "called ns:lookup"],
      "🚀 launch": ["__launch", "called 🚀 launch"],
    });
    // The trace and the validation errors name the canonical MCP tool.
    expect(r.toolTrace!.map((t) => t.toolName).sort()).toEqual(Object.keys(r.result as object).sort());
    expect(front.stderr.some((l) => l.includes("upstream tool left out") && l.includes("x/x/x/"))).toBe(true);
  });

  it("R6.1-8 escaped names are canonical everywhere the script and the agent see them: discovery, validation errors, declarations", async () => {
    const r = await front.run(`
      import { get_weather, files_read } from "@codemode/servers/names";
      import { getTool, searchTools } from "@codemode/discovery";
      const def = await getTool("names", "get weather");
      const found = await searchTools("weather", { serverId: "names", detail: "name" });
      let invalid;
      try { await get_weather({ city: 7 }); } catch (e) { invalid = [e.name, e.toolName, e.exportName, e.path]; }
      globalThis.__codemode_result__ = { def: [def.toolName, def.exportName, def.inputSchema.required], found: found.results[0], invalid, read: await files_read(), weather: await get_weather({ city: "Oslo" }) };`);
    expect(r.result).toEqual({
      def: ["get weather", "get_weather", ["city"]],
      found: { serverId: "names", toolName: "get weather", exportName: "get_weather" },
      invalid: ["SchemaValidationError", "get weather", "get_weather", "/city"],
      read: "called files/read",
      weather: "called get weather for Oslo",
    });
    const names = decl.slice(decl.indexOf('declare module "@codemode/servers/names"'));
    expect(names).toContain("export function get_weather(input: { city: string }): Promise<unknown>;");
    expect(names).toContain('MCP tool "get weather" of server "names".');
    expect(names).toContain("export function météo(");
    expect(names).not.toMatch(/_u\.[A-Za-z0-9.-]*_[0-9a-f]{2}/); // no escaped catalog name leaks
  });
});

describe("spec 6.2: TypeScript declarations", () => {
  it("R6.2-1 declarations are generated from the MCP schemas for every tool", () => {
    expect(block("get_item")).toContain("export function get_item(input: { id: string }): Promise<unknown>;");
    expect(block("weather")).toMatch(/export function weather\(input: \{ city: "Oslo" \| "Lima" \}\): Promise<\{ city: string; tempC: number \}>;/);
  });

  it("R6.2-2 enum, const, oneOf/anyOf, nullable, $ref, recursive objects, additionalProperties, patternProperties and tuples are typed", () => {
    const complex = decl.slice(decl.indexOf("type Complex_node"), decl.indexOf("export function complex("));
    const fn = block("complex");
    expect(fn).toContain('mode: "fast" | "slow"');
    expect(fn).toContain("version?: 2");
    expect(fn).toContain("target?: string | number");
    expect(fn).toContain("label?: string | null");
    expect(fn).toContain("note?: string | null");
    expect(fn).toContain("tree?: Complex_node");
    expect(fn).toMatch(/tags\?: \{ \[key: string\]: string \}/);
    expect(fn).toMatch(/metrics\?: \{[\s\S]*?\[key: string\]: (number|unknown)/);
    expect(fn).toContain("point: [number, number");
    expect(complex).toMatch(/children\?: Complex_node\[\]/);
    const probe = `import { complex } from "@codemode/servers/fixture";
export async function probe(): Promise<void> {
  await complex({ mode: "fast", point: [1, 2], version: 2, target: 3, label: null, note: null, tags: { a: "b" }, tree: { name: "r", children: [{ name: "c" }] } });
  // @ts-expect-error mode is an enum
  await complex({ mode: "medium", point: [1, 2] });
  // @ts-expect-error version is const 2
  await complex({ mode: "fast", point: [1, 2], version: 3 });
  // @ts-expect-error point is a pair
  await complex({ mode: "fast", point: [1] });
  // @ts-expect-error tags are strings
  await complex({ mode: "fast", point: [1, 2], tags: { a: 1 } });
  // @ts-expect-error tree nodes need a name
  await complex({ mode: "fast", point: [1, 2], tree: { children: [] } });
}
`;
    expect(typecheck({ "codemode.d.ts": decl, "probe.ts": probe })).toEqual([]);
  });

  it("R6.2-3 a schema feature that cannot be represented falls back to unknown with a warning doc comment", () => {
    const odd = block("odd");
    expect(odd).toMatch(/Warning/);
    expect(odd).toMatch(/x\?: unknown/);
  });
});

describe("spec 6.3: tool annotations", () => {
  it("R6.3-1 annotations are surfaced in the generated doc comments", () => {
    const del = block("delete_");
    expect(del).toContain("@destructiveHint true");
    expect(del).toContain("@readOnlyHint false");
    expect(del).toContain("@idempotentHint true");
    expect(block("echo_v2")).toContain("@title Echo v2");
  });

  it("R6.3-2 annotations are in ToolSummary.annotations and ToolDefinition.annotations", async () => {
    const r = await front.run(`
      import { listTools, getTool } from "@codemode/discovery";
      const summary = (await listTools("fixture")).find((t) => t.toolName === "delete");
      globalThis.__codemode_result__ = [summary.annotations, (await getTool("fixture", "echo.v2")).annotations];`);
    expect(r.result).toEqual([
      { destructiveHint: true, readOnlyHint: false, idempotentHint: true },
      { readOnlyHint: true, openWorldHint: false, title: "Echo v2" },
    ]);
  });
});

/**
 * ES module semantics for `codemode.run` scripts on an engine that runs compiled scripts
 * (spec 3.2.1). The sidecar parses the script as a module with acorn (so syntax errors, a
 * top-level `return`, duplicate bindings and the like are reported exactly as a module
 * loader would, before anything runs), links its static imports against the built-in
 * modules (an unknown module or export is an IMPORT_FAILURE diagnostic, as a link error
 * would be), and rewrites it into an async function body.
 *
 * Line 1 of the body is a new prologue (`"use strict"`, one `const` per import, bound
 * through the body's only argument); import declarations and `export` keywords are blanked
 * with spaces, so every position of the script is one line down, same column; `export
 * default <expression>` becomes `;(<expression>)`; `import(x)` calls the prelude's dynamic
 * import. `import.meta` is refused. Top-level `this` is undefined and declarations stay
 * local, as in a module (docs/module-notes.md#srcsandboxsurfacesmcp-runmodule-transformts).
 */
import { parse, type Node } from "acorn";
import type { Diagnostic } from "./diagnostic.js";

/** What a module exports, or why it cannot be imported. */
export type ModuleLookup = { ok: true; exports: ReadonlySet<string> } | { ok: false; message: string; hint: string; errorClass?: string };

export type Transformed = { ok: true; body: string; modules: string[] } | { ok: false; diagnostic: Diagnostic };

/** Lines the prologue adds before the script (positions in the body are this much lower). */
export const PROLOGUE_LINES = 1;
const LINK = "__cm$link";
const DYNAMIC = "__cm$import";

type AnyNode = Node & Record<string, unknown>;
type Edit = { start: number; end: number; text: string };

function position(code: string, offset: number): string {
  let line = 1;
  let col = 1;
  for (let i = 0; i < offset && i < code.length; i++) {
    if (code[i] === "\n") {
      line++;
      col = 1;
    } else col++;
  }
  return `${line}:${col}`;
}

function blank(code: string, start: number, end: number): Edit {
  return { start, end, text: code.slice(start, end).replace(/[^\n\r\u2028\u2029]/g, " ") };
}

function importFailure(message: string, hint: string, path: string, errorClass?: string): { ok: false; diagnostic: Diagnostic } {
  return { ok: false, diagnostic: { severity: "error", code: "IMPORT_FAILURE", message, hint, path, ...(errorClass ? { errorClass } : {}) } };
}

function nameOf(n: AnyNode | undefined): string {
  if (!n) return "";
  return n.type === "Identifier" ? String(n.name) : String(n.value);
}

/** Every node of the tree, without recursion (deep programs cannot overflow the stack). */
function* nodes(root: AnyNode): Generator<AnyNode> {
  const stack: AnyNode[] = [root];
  while (stack.length > 0) {
    const n = stack.pop()!;
    yield n;
    for (const key of Object.keys(n)) {
      if (key === "loc") continue;
      const v = n[key];
      if (Array.isArray(v)) {
        for (const c of v) if (c && typeof c === "object" && typeof (c as AnyNode).type === "string") stack.push(c as AnyNode);
      } else if (v && typeof v === "object" && typeof (v as AnyNode).type === "string") stack.push(v as AnyNode);
    }
  }
}

export function transformModule(code: string, lookup: (specifier: string) => ModuleLookup): Transformed {
  let ast: AnyNode;
  try {
    ast = parse(code, { ecmaVersion: "latest", sourceType: "module", allowHashBang: true, locations: true }) as unknown as AnyNode;
  } catch (err) {
    const e = err as { message?: string; loc?: { line: number; column: number } };
    if (!(err instanceof SyntaxError) || !e.loc) {
      return {
        ok: false,
        diagnostic: {
          severity: "error",
          code: "SYNTAX_ERROR",
          message: "SyntaxError: the script could not be parsed (it may be nested too deeply).",
          hint: "Simplify the deepest nesting of the script.",
        },
      };
    }
    const message = String(e.message).replace(/\s*\(\d+:\d+\)$/, "");
    const path = `${e.loc.line}:${e.loc.column + 1}`;
    return {
      ok: false,
      diagnostic: {
        severity: "error",
        code: "SYNTAX_ERROR",
        message: `SyntaxError: ${message} (line ${e.loc.line}, column ${e.loc.column + 1})`,
        hint: `Fix the syntax at line ${e.loc.line}, column ${e.loc.column + 1}; the code is an ES module (strict mode, import/export, top-level await).`,
        path,
      },
    };
  }
  const edits: Edit[] = [];
  const bindings: string[] = [];
  const modules = new Set<string>();
  if (code.startsWith("#!")) edits.push(blank(code, 0, code.indexOf("\n") < 0 ? code.length : code.indexOf("\n")));

  /** Links one module and the names taken from it; a failure is the script's diagnostic. */
  const linkNames = (source: AnyNode, names: Array<{ name: string; node: AnyNode }>): { ok: false; diagnostic: Diagnostic } | undefined => {
    const specifier = String(source.value);
    const found = lookup(specifier);
    if (!found.ok) return importFailure(found.message, found.hint, position(code, source.start), found.errorClass);
    for (const { name, node } of names) {
      if (found.exports.has(name)) continue;
      const known = [...found.exports].sort();
      const near = known.filter((k) => k.toLowerCase().replace(/[^a-z0-9]/g, "") === name.toLowerCase().replace(/[^a-z0-9]/g, ""));
      const message =
        name === "default"
          ? `module ${JSON.stringify(specifier)} has no default export`
          : `module ${JSON.stringify(specifier)} has no export ${JSON.stringify(name)}`;
      const hint =
        name === "default"
          ? `Use \`import * as x from ${JSON.stringify(specifier)}\` or named imports.`
          : near.length > 0
            ? `Did you mean ${near.map((n) => JSON.stringify(n)).join(" or ")}? Export names follow the tool-name mapping; __meta__.tools lists them.`
            : `Its exports: ${known.slice(0, 40).join(", ")}${known.length > 40 ? ", …" : ""}.`;
      return importFailure(
        message,
        hint,
        position(code, node.start),
        specifier.startsWith("@codemode/servers/") && name !== "default" ? "ToolNotFoundError" : undefined,
      );
    }
    modules.add(specifier);
    return undefined;
  };

  for (const stmt of ast.body as AnyNode[]) {
    if (stmt.type === "ImportDeclaration") {
      const specs = stmt.specifiers as AnyNode[];
      const named = specs
        .filter((s) => s.type !== "ImportNamespaceSpecifier")
        .map((s) => ({ name: s.type === "ImportDefaultSpecifier" ? "default" : nameOf(s.imported as AnyNode), node: s }));
      const failed = linkNames(stmt.source as AnyNode, named);
      if (failed) return failed;
      const from = `${LINK}(${JSON.stringify(String((stmt.source as AnyNode).value))})`;
      for (const s of specs) if (s.type === "ImportNamespaceSpecifier") bindings.push(`const ${nameOf(s.local as AnyNode)} = ${from};`);
      const pairs = specs
        .filter((s) => s.type === "ImportSpecifier")
        .map((s) => `${JSON.stringify(nameOf(s.imported as AnyNode))}: ${nameOf(s.local as AnyNode)}`);
      if (pairs.length > 0) bindings.push(`const { ${pairs.join(", ")} } = ${from};`);
      edits.push(blank(code, stmt.start, stmt.end));
    } else if (stmt.type === "ExportNamedDeclaration" || stmt.type === "ExportAllDeclaration") {
      const decl = stmt.declaration as AnyNode | null | undefined;
      if (decl) {
        edits.push(blank(code, stmt.start, decl.start));
        continue;
      }
      if (stmt.source) {
        const names = ((stmt.specifiers as AnyNode[] | undefined) ?? []).map((s) => ({ name: nameOf(s.local as AnyNode), node: s }));
        const failed = linkNames(stmt.source as AnyNode, names);
        if (failed) return failed;
      }
      edits.push(blank(code, stmt.start, stmt.end));
    } else if (stmt.type === "ExportDefaultDeclaration") {
      const decl = stmt.declaration as AnyNode;
      if ((decl.type === "FunctionDeclaration" || decl.type === "ClassDeclaration") && decl.id) {
        edits.push(blank(code, stmt.start, decl.start));
      } else {
        const head = blank(code, stmt.start, decl.start);
        edits.push({ ...head, text: `;(${head.text.slice(2)}` }, { start: decl.end, end: decl.end, text: ")" });
      }
    }
  }
  for (const n of nodes(ast)) {
    if (n.type === "MetaProperty" && nameOf(n.meta as AnyNode) === "import") {
      return importFailure(
        "import.meta is not available in codemode.run.",
        "Remove import.meta; the script has no URL or file of its own.",
        position(code, n.start),
      );
    }
    if (n.type === "ImportExpression") edits.push({ start: n.start, end: n.start + "import".length, text: DYNAMIC });
  }
  edits.sort((a, b) => b.start - a.start || b.end - a.end);
  let body = code;
  for (const e of edits) body = body.slice(0, e.start) + e.text + body.slice(e.end);
  const prologue = `"use strict";const ${LINK} = arguments[0], ${DYNAMIC} = ${LINK}("");${bindings.join("")}${LINK}(null);`;
  return { ok: true, body: `${prologue}\n${body}`, modules: [...modules] };
}

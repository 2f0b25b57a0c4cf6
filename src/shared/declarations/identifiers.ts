/**
 * Stable JavaScript identifiers for MCP servers and tools (Code Mode for MCP spec 6.1).
 * Two surfaces need them: the spec's generated module exports ("export" style: illegal
 * characters become `_`) and code mode's `MCP.<server>.<camelName>` functions ("camel"
 * style). The same set of canonical names always yields the same identifiers, whatever
 * order the names arrive in, so declarations, the guest runtime and `$api()` agree.
 */

export type IdentifierStyle = "camel" | "export";

/** Reserved words (spec 6.1's list plus the strict-mode and future reserved words). */
const JS_RESERVED: ReadonlySet<string> = new Set([
  "break",
  "case",
  "class",
  "const",
  "continue",
  "debugger",
  "default",
  "delete",
  "do",
  "else",
  "export",
  "extends",
  "false",
  "finally",
  "for",
  "function",
  "if",
  "import",
  "in",
  "instanceof",
  "new",
  "null",
  "return",
  "super",
  "switch",
  "this",
  "throw",
  "true",
  "try",
  "typeof",
  "var",
  "void",
  "while",
  "with",
  "yield",
  "let",
  "static",
  "await",
  // Not in the spec's list, but a declaration or strict-mode module refuses them too.
  "enum",
  "implements",
  "interface",
  "package",
  "private",
  "protected",
  "public",
  "arguments",
  "eval",
]);

/** Names that must never become a tool function on an `MCP.<server>` object. */
export const MCP_MEMBER_RESERVED: ReadonlySet<string> = new Set([
  "$api",
  "resources",
  "prompts",
  "then",
  "constructor",
  "prototype",
  "__proto__",
  "toString",
  "valueOf",
  "hasOwnProperty",
  "toJSON",
]);

/** Names that must never become a server key on the `MCP` object. */
export const MCP_SERVER_RESERVED: ReadonlySet<string> = new Set([
  "then",
  "constructor",
  "prototype",
  "__proto__",
  "toString",
  "valueOf",
  "hasOwnProperty",
  "toJSON",
]);

const ID_START = /^[\p{ID_Start}$_]$/u;
const ID_PART = /^[\p{ID_Continue}$\u200C\u200D]$/u;

/** True when `name` is a usable identifier: syntactically valid and not a reserved word. */
export function isSafeIdentifier(name: string): boolean {
  const chars = Array.from(name);
  if (chars.length === 0 || !ID_START.test(chars[0] ?? "")) return false;
  return chars.every((c) => ID_PART.test(c)) && !JS_RESERVED.has(name);
}

/** Illegal identifier characters become `_` (spec 6.1). */
function exportBase(name: string): string {
  return Array.from(name, (c) => (ID_PART.test(c) ? c : "_")).join("");
}

/** A word made only of upper-case letters (digits allowed), such as "API" or "V2". */
function isUpperWord(word: string): boolean {
  return /\p{Lu}/u.test(word) && !/\p{Ll}/u.test(word);
}

/** Split on `_` and every character an identifier cannot hold; join in lower camel case. */
function camelBase(name: string): string {
  const words: string[] = [];
  let word = "";
  for (const c of name) {
    if (c !== "_" && ID_PART.test(c)) word += c;
    else if (word) {
      words.push(word);
      word = "";
    }
  }
  if (word) words.push(word);
  return words
    .map((w, i) => {
      const lowered = isUpperWord(w) ? w.toLowerCase() : w;
      const first = Array.from(lowered)[0] ?? "";
      const rest = lowered.slice(first.length);
      return (i === 0 ? first.toLowerCase() : first.toUpperCase()) + rest;
    })
    .join("");
}

/** The clean identifier for one name, before collisions are resolved. */
function cleanIdentifier(name: string, style: IdentifierStyle, reserved: ReadonlySet<string>): string {
  let id = style === "camel" ? camelBase(name) : exportBase(name);
  if (id === "") return "_";
  if (!ID_START.test(Array.from(id)[0] ?? "")) id = `_${id}`;
  while (JS_RESERVED.has(id) || reserved.has(id)) id += "_";
  return id;
}

/**
 * Map each canonical name to its identifier. Names are ordered by code unit; within a
 * group of names that share a clean identifier the first keeps it and later ones get
 * `__2`, `__3`, ... (skipping any identifier already taken). The returned map iterates
 * in that sorted order; duplicate input names appear once.
 */
export function assignIdentifiers(names: readonly string[], style: IdentifierStyle, reserved: ReadonlySet<string> = new Set()): Map<string, string> {
  const sorted = [...new Set(names)].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const clean = new Map(sorted.map((n) => [n, cleanIdentifier(n, style, reserved)] as const));
  // Every clean identifier is reserved for the first name that produces it.
  const taken = new Set<string>();
  const owner = new Map<string, string>();
  for (const n of sorted) {
    const id = clean.get(n) ?? "_";
    if (!owner.has(id)) {
      owner.set(id, n);
      taken.add(id);
    }
  }
  const out = new Map<string, string>();
  for (const n of sorted) {
    const id = clean.get(n) ?? "_";
    if (owner.get(id) === n) {
      out.set(n, id);
      continue;
    }
    let k = 2;
    while (taken.has(`${id}__${k}`) || reserved.has(`${id}__${k}`)) k++;
    const suffixed = `${id}__${k}`;
    taken.add(suffixed);
    out.set(n, suffixed);
  }
  return out;
}

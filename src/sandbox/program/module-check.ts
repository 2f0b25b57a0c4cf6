/**
 * Refuses module access before a program runs: `import` declarations, dynamic
 * `import()`, `import.meta`, `require(...)` and other module-loader patterns. It reads
 * tokens (acorn's tokenizer, which is iterative and tells strings, comments, regexes
 * and template text apart from code), so `important`, `"import x"` or `obj.import` are
 * not refused. Deeply nested source cannot overflow it: tokenizing does not recurse.
 */
import { parse, tokenizer, tokTypes, type Token } from "acorn";

export type ModuleAccess = { pattern: string; line: number; column: number };

/**
 * The checker could not read the program. Either it is a syntax error (the compiler
 * reports it) or it is valid JavaScript the checker misreads; the caller refuses the
 * latter, so the check fails closed.
 */
export const UNVERIFIABLE = "unverifiable";

/** Globals whose mere use means "load a module" in some runtime. */
const LOADER_NAMES = new Set(["require", "importScripts", "createRequire", "__non_webpack_require__", "__webpack_require__"]);

/**
 * Every pattern refused below is spelled in the source with one of these words, unless an
 * identifier is written with escapes (`req\u0075ire`), which needs a backslash. A program
 * with neither cannot contain one, so it is not tokenized (most programs: the tokenizer
 * was about 6% of a worker's time per exec for `return 1 + 1`).
 */
const MAY_REFER = /import|export|require|\\/i;

export function findModuleAccess(source: string): ModuleAccess | undefined {
  if (!MAY_REFER.test(source)) return undefined;
  let prev: Token | undefined;
  let beforePrev: Token | undefined;
  let pendingImport: Token | undefined;
  let pendingRequire: Token | undefined;
  const at = (t: Token, pattern: string): ModuleAccess => ({
    pattern,
    line: t.loc?.start.line ?? 1,
    column: (t.loc?.start.column ?? 0) + 1,
  });
  let tokens: Iterable<Token>;
  try {
    tokens = tokenizer(source, { ecmaVersion: "latest", allowReturnOutsideFunction: true, allowAwaitOutsideFunction: true, locations: true });
    for (const tok of tokens) {
      if (pendingImport) {
        // `import` as a property key (`{ import: 1 }`) is not module access.
        if (tok.type !== tokTypes.colon) {
          const pattern = tok.type === tokTypes.parenL ? "import()" : tok.type === tokTypes.dot ? "import.meta" : "import";
          return at(pendingImport, pattern);
        }
        pendingImport = undefined;
      }
      const afterDot = prev?.type === tokTypes.dot || prev?.type === tokTypes.questionDot;
      // acorn's tokenizer treats a word after "?." as it would not after ".": a keyword
      // (`o?.return`, `o?.delete`, `o?.typeof`…) or the contextual `of`/`yield` lets the next
      // "/" start a regex, where QuickJS sees a division (a property access ends an
      // expression): `o?.return / import("x") /g` would hide an import. acorn's parser shares
      // the misreading (with a line break before the "/", ASI even makes it parse cleanly),
      // so neither can decide. No valid reading has a regex right after `?.name`: refused.
      if (tok.type === tokTypes.regexp && (prev?.type === tokTypes.name || prev?.type.keyword !== undefined) && beforePrev?.type === tokTypes.questionDot) {
        return at(tok, UNVERIFIABLE);
      }
      if (tok.type === tokTypes._import && !afterDot) pendingImport = tok;
      else if (tok.type === tokTypes._export && !afterDot) return at(tok, "export");
      else if (tok.type === tokTypes.name && LOADER_NAMES.has(String((tok as Token & { value?: unknown }).value))) {
        if (String((tok as Token & { value?: unknown }).value) === "require") {
          // `require(` and `module.require(`: calls only, so a variable named require is fine.
          pendingRequire = tok;
        } else if (!afterDot) return at(tok, String((tok as Token & { value?: unknown }).value));
      } else if (pendingRequire) {
        if (tok.type === tokTypes.parenL) return at(pendingRequire, "require()");
        pendingRequire = undefined;
      }
      beforePrev = prev;
      prev = tok;
    }
    if (pendingImport) return at(pendingImport, "import");
  } catch {
    // The tokenizer alone can misread `/` after some tokens (e.g. `o?.return / 2`) as a
    // regex. Fall back to a full parse, which knows the context.
    return findInTree(source);
  }
  return undefined;
}

type Node = { type: string; loc?: { start: { line: number; column: number } }; [key: string]: unknown };

/** Walks the AST iteratively (no recursion) for module access. Fails closed. */
function findInTree(source: string): ModuleAccess | undefined {
  let root: Node;
  try {
    // Parsed as the VM runs it: the body of an async function (line numbers unchanged).
    root = parse(`(async function () {${source}\n})`, { ecmaVersion: "latest", sourceType: "script", locations: true }) as unknown as Node;
  } catch (err) {
    // A plain syntax error is reported by the compiler with its location; anything the
    // checker cannot read otherwise (e.g. nesting too deep for the parser) is refused.
    const loc = (err as { loc?: { line: number; column: number } }).loc;
    return { pattern: UNVERIFIABLE, line: loc?.line ?? 1, column: (loc?.column ?? 0) + 1 };
  }
  const at = (n: Node, pattern: string): ModuleAccess => ({ pattern, line: n.loc?.start.line ?? 1, column: (n.loc?.start.column ?? 0) + 1 });
  const stack: Node[] = [root];
  while (stack.length > 0) {
    const n = stack.pop()!;
    if (n.type === "ImportExpression") return at(n, "import()");
    if (n.type === "ImportDeclaration") return at(n, "import");
    if (n.type === "MetaProperty" && (n.meta as Node | undefined)?.name === "import") return at(n, "import.meta");
    if (n.type.startsWith("Export")) return at(n, "export");
    if (n.type === "CallExpression") {
      const callee = n.callee as Node;
      const name = callee.type === "Identifier" ? callee.name : callee.type === "MemberExpression" ? (callee.property as Node).name : undefined;
      if (name === "require") return at(n, "require()");
    }
    if (n.type === "Identifier" && LOADER_NAMES.has(String(n.name)) && n.name !== "require") return at(n, String(n.name));
    for (const value of Object.values(n)) {
      if (Array.isArray(value)) {
        for (const v of value) if (v && typeof v === "object" && typeof (v as Node).type === "string") stack.push(v as Node);
      } else if (value && typeof value === "object" && typeof (value as Node).type === "string") stack.push(value as Node);
    }
  }
  return undefined;
}

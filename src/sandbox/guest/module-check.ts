/**
 * Refuses module access before a program runs: `import` declarations, dynamic
 * `import()`, `import.meta`, `require(...)` and other module-loader patterns. It reads
 * tokens (acorn's tokenizer, which is iterative and tells strings, comments, regexes
 * and template text apart from code), so `important`, `"import x"` or `obj.import` are
 * not refused. Deeply nested source cannot overflow it: tokenizing does not recurse.
 */
import { tokenizer, tokTypes, type Token } from "acorn";

export type ModuleAccess = { pattern: string; line: number; column: number };

/** Globals whose mere use means "load a module" in some runtime. */
const LOADER_NAMES = new Set(["require", "importScripts", "createRequire", "__non_webpack_require__", "__webpack_require__"]);

export function findModuleAccess(source: string): ModuleAccess | undefined {
  let prev: Token | undefined;
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
      prev = tok;
    }
    if (pendingImport) return at(pendingImport, "import");
  } catch {
    // A tokenizer error is a syntax error; the compiler reports it with its location.
    return undefined;
  }
  return undefined;
}

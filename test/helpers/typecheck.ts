/**
 * Type-check a set of in-memory files with the TypeScript compiler API, in-process, so
 * tests can prove generated declarations compile (and that `// @ts-expect-error` lines
 * really are refused) without writing anything to disk. Library files are read from the
 * installed typescript package once and cached for the whole test file.
 */
import ts from "typescript";

const ROOT = "/virtual/";
const libCache = new Map<string, ts.SourceFile | undefined>();

/** Strict, no emit, ES2022 library, no ambient @types: what a guest program would see. */
export const STRICT_OPTIONS: ts.CompilerOptions = {
  strict: true,
  noEmit: true,
  target: ts.ScriptTarget.ES2022,
  lib: ["lib.es2022.d.ts"],
  types: [],
  skipLibCheck: true,
};

/**
 * Diagnostics, one formatted line each (`path:line:col TScode: message`), for the given
 * files keyed by relative path (e.g. "mcp/index.d.ts"). An empty array means clean.
 */
export function typecheck(files: Readonly<Record<string, string>>, options: ts.CompilerOptions = {}): string[] {
  const compilerOptions: ts.CompilerOptions = { ...STRICT_OPTIONS, ...options };
  const virtual = (fileName: string): string | undefined =>
    fileName.startsWith(ROOT) && Object.hasOwn(files, fileName.slice(ROOT.length)) ? files[fileName.slice(ROOT.length)] : undefined;
  const host = ts.createCompilerHost(compilerOptions, true);
  host.getSourceFile = (fileName, languageVersion) => {
    const text = virtual(fileName);
    if (text !== undefined) return ts.createSourceFile(fileName, text, languageVersion, true);
    if (fileName.startsWith(ROOT)) return undefined;
    if (!libCache.has(fileName)) {
      const lib = ts.sys.readFile(fileName);
      libCache.set(fileName, lib === undefined ? undefined : ts.createSourceFile(fileName, lib, languageVersion, false));
    }
    return libCache.get(fileName);
  };
  host.fileExists = (fileName) => (fileName.startsWith(ROOT) ? virtual(fileName) !== undefined : ts.sys.fileExists(fileName));
  host.readFile = (fileName) => (fileName.startsWith(ROOT) ? virtual(fileName) : ts.sys.readFile(fileName));
  host.writeFile = () => undefined;
  host.getCurrentDirectory = () => ROOT;
  const program = ts.createProgram(
    Object.keys(files).map((f) => ROOT + f),
    compilerOptions,
    host,
  );
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const message = ts.flattenDiagnosticMessageText(d.messageText, "\n");
    if (!d.file || d.start === undefined) return `TS${d.code}: ${message}`;
    const { line, character } = d.file.getLineAndCharacterOfPosition(d.start);
    const name = d.file.fileName.startsWith(ROOT) ? d.file.fileName.slice(ROOT.length) : d.file.fileName;
    return `${name}:${line + 1}:${character + 1} TS${d.code}: ${message}`;
  });
}

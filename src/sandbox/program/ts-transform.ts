/**
 * TypeScript cells become JavaScript by a source transform only (no typechecking, no module
 * resolution), with sucrase, chosen by measurement (bench/ts-transform.bench.mjs). It keeps
 * line numbers; its source map then puts each token back at its TypeScript column
 * (./ts-columns.ts), so guest errors point at the model's own line and column. It is
 * imported lazily: a JavaScript cell never loads it.
 */
import { CELL_PREFIX } from "../guest/bridge-names.js";
import { restoreColumns } from "./ts-columns.js";

type SucraseOptions = { transforms: string[]; disableESTransforms: boolean; filePath?: string; sourceMapOptions?: { compiledFilename: string } };
type SucraseTransform = (code: string, options: SucraseOptions) => { code: string; sourceMap?: { mappings: string } };
let transformFn: SucraseTransform | undefined;

export type TransformResult = { ok: true; code: string } | { ok: false; error: string; line: number; column: number };

/** True once a TypeScript cell has loaded the transformer in this thread. */
export function transformerLoaded(): boolean {
  return transformFn !== undefined;
}

/**
 * Transforms the body of a cell. The body is transformed inside the same
 * `async function` wrapper the VM uses, so `return` and `await` parse, and the result
 * is unwrapped again so the caller wraps it like JavaScript.
 */
export async function transformTypeScript(source: string): Promise<TransformResult> {
  if (!transformFn) {
    const mod = (await import("sucrase")) as unknown as { transform: SucraseTransform };
    transformFn = mod.transform;
  }
  const wrapped = `${CELL_PREFIX}${source}\n})`;
  try {
    const result = transformFn(wrapped, {
      transforms: ["typescript"],
      disableESTransforms: true,
      filePath: "cell.ts",
      sourceMapOptions: { compiledFilename: "cell.js" },
    });
    const out = result.sourceMap ? restoreColumns(wrapped, result.code, result.sourceMap.mappings) : result.code;
    const start = out.indexOf(CELL_PREFIX);
    const end = out.lastIndexOf("\n})");
    if (start !== 0 || end < 0) return { ok: false, error: "TypeScript transform changed the cell wrapper", line: 1, column: 1 };
    return { ok: true, code: out.slice(CELL_PREFIX.length, end) };
  } catch (err) {
    const e = err as { message?: string; loc?: { line: number; column: number } };
    const line = e.loc?.line ?? 1;
    const lines = source.split("\n").length;
    const column = e.loc?.column ?? 1;
    const message = String(e.message ?? "TypeScript transform failed")
      .replace(/^Error transforming cell\.ts: /, "")
      .replace(/\s*\(\d+:\d+\)$/, "");
    return {
      ok: false,
      error: `TypeScript SyntaxError: ${message}`,
      line: Math.min(line, lines),
      column: line === 1 ? Math.max(1, column - CELL_PREFIX.length) : column,
    };
  }
}

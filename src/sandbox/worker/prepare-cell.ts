/**
 * What an exec's program must pass before it runs: module access is refused (checked before
 * and after the TypeScript transform), TypeScript is transformed, and an unreadable program
 * is reported as the syntax error it is. Used by the pool worker (./worker.ts) and by a
 * replay (../replay/replay-worker.ts), so both run exactly what an exec runs.
 */
import type { ExecTask, TaskOutcome } from "../pool/task-protocol.js";
import { findModuleAccess, UNVERIFIABLE, type ModuleAccess } from "../program/module-check.js";
import { compileCell } from "./compiler.js";
import { formatLocation } from "./guest-errors.js";
import { transformTypeScript } from "../program/ts-transform.js";

export async function prepareCell(
  task: Pick<ExecTask, "source" | "language" | "outputBytesUsed">,
  wasm: WebAssembly.Module,
): Promise<{ ok: true; source: string } | { ok: false; outcome: TaskOutcome }> {
  const invalid = (error: string): { ok: false; outcome: TaskOutcome } => ({
    ok: false,
    outcome: { status: "failed", error, code: "invalid_input", outputBytes: task.outputBytesUsed },
  });
  let source = task.source;
  // The model's TypeScript is checked best-effort before the transform (which drops
  // unused imports silently); what runs is always checked after it.
  const before = findModuleAccess(source);
  if (before && !(before.pattern === UNVERIFIABLE && task.language === "typescript")) return refuseOrReport(before, source, invalid, wasm);
  if (task.language === "typescript") {
    const out = await transformTypeScript(source);
    if (!out.ok) return invalid(`${out.error} (${formatLocation(out.line, out.column)})`);
    source = out.code;
    const after = findModuleAccess(source);
    if (after) return refuseOrReport(after, source, invalid, wasm);
  }
  return { ok: true, source };
}

/** Module access is refused; an unreadable program is a syntax error or refused. */
async function refuseOrReport(found: ModuleAccess, source: string, invalid: (e: string) => { ok: false; outcome: TaskOutcome }, wasm: WebAssembly.Module) {
  if (found.pattern !== UNVERIFIABLE) return invalid(moduleMessage(found));
  const compiled = await compileCell(wasm, source);
  if (!compiled.ok) return invalid(compiled.message);
  return invalid(
    `exec could not verify that the program has no module access (the checker cannot read it near line ${found.line}, column ${found.column}); rewrite that expression.`,
  );
}

function moduleMessage(found: { pattern: string; line: number; column: number }): string {
  return `exec rejects module access: \`${found.pattern}\` is not available in code mode (line ${found.line}, column ${found.column}). Use tools.search/tools.call instead.`;
}

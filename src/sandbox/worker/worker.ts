/**
 * The piscina worker entry: one call runs one exec task. It refuses to load on the
 * main thread. The compiled WebAssembly.Module arrives once in workerData and is shared
 * by every VM this thread creates; it is never recompiled per run.
 */
import { isMainThread, threadId, workerData } from "node:worker_threads";
import type { ExecTask, TaskCounters, TaskOutcome, WorkerMessage } from "../task-protocol.js";
import { findModuleAccess, UNVERIFIABLE, type ModuleAccess } from "../guest/module-check.js";
import { CELL_FILENAME, wrapCell } from "../guest/prelude.js";
import { compileScript } from "./compiler.js";
import { cellPosition } from "./vm-session.js";
import { transformTypeScript } from "../guest/ts-transform.js";
import { runExecSession } from "./vm-session.js";

if (isMainThread) throw new Error("sandbox/worker/worker.js runs only inside a pool worker thread");

const wasm = (workerData as { wasmModule: WebAssembly.Module }).wasmModule;

const zero = (): TaskCounters => ({ search: 0, describe: 0, call: 0 });

async function prepare(task: ExecTask): Promise<{ ok: true; source: string } | { ok: false; outcome: TaskOutcome }> {
  const invalid = (error: string): { ok: false; outcome: TaskOutcome } => ({
    ok: false,
    outcome: { status: "failed", error, code: "invalid_input", outputBytes: task.outputBytesUsed, counters: zero() },
  });
  let source = task.source;
  // The model's TypeScript is checked best-effort before the transform (which drops
  // unused imports silently); what runs is always checked after it.
  const before = findModuleAccess(source);
  if (before && !(before.pattern === UNVERIFIABLE && task.language === "typescript")) return refuseOrReport(before, source, invalid);
  if (task.language === "typescript") {
    const out = await transformTypeScript(source);
    if (!out.ok) return invalid(`${out.error} (line ${out.line}, column ${out.column})`);
    source = out.code;
    const after = findModuleAccess(source);
    if (after) return refuseOrReport(after, source, invalid);
  }
  return { ok: true, source };
}

/** Module access is refused; an unreadable program is a syntax error or refused. */
async function refuseOrReport(found: ModuleAccess, source: string, invalid: (e: string) => { ok: false; outcome: TaskOutcome }) {
  if (found.pattern !== UNVERIFIABLE) return invalid(moduleMessage(found));
  const compiled = await compileScript(wasm, wrapCell(source), CELL_FILENAME);
  if (!compiled.ok) {
    const pos = cellPosition(compiled.error.line, compiled.error.column);
    return invalid(`${compiled.error.message} (line ${pos.line}, column ${pos.column})`);
  }
  return invalid(
    `exec could not verify that the program has no module access (the checker cannot read it near line ${found.line}, column ${found.column}); rewrite that expression.`,
  );
}

function moduleMessage(found: { pattern: string; line: number; column: number }): string {
  return `exec rejects module access: \`${found.pattern}\` is not available in code mode (line ${found.line}, column ${found.column}). Use tools.search/tools.call instead.`;
}

export default async function runTask(task: ExecTask): Promise<void> {
  const post = (m: WorkerMessage) => task.port.postMessage(m);
  post({ t: "started", threadId });
  let outcome: TaskOutcome;
  try {
    const prepared = await prepare(task);
    outcome = prepared.ok ? await runExecSession(task, wasm, prepared.source) : prepared.outcome;
  } catch (err) {
    outcome = { status: "failed", error: `internal: ${(err as Error).message}`, code: "internal_error", outputBytes: task.outputBytesUsed, counters: zero() };
  }
  post({ t: "done", outcome });
  task.port.close();
}

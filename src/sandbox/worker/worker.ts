/**
 * The piscina worker entry: one call runs one exec task or one resumed segment of a
 * suspended run. It refuses to load on the main thread. The compiled WebAssembly.Module
 * arrives once in workerData and is shared by every VM this thread creates; it is never
 * recompiled per run.
 */
import { isMainThread, threadId, workerData } from "node:worker_threads";
import { CLAIM_STARTED, type ExecTask, type Task, type TaskOutcome, type WorkerMessage } from "../pool/task-protocol.js";
import { prepareCell } from "./prepare-cell.js";
import { currentWarmVms, runExecSession, runResumeSession, runUnparkSession } from "./sessions.js";
import { memoryReport } from "./memory-report.js";
import { openCatalog } from "../pool/shared-catalog.js";
// A background lane's thread lowers its OS priority before it runs anything (./priority.ts).
import "./priority.js";

if (isMainThread) throw new Error("sandbox/worker/worker.js runs only inside a pool worker thread");

const wasm = (workerData as { wasmModule: WebAssembly.Module }).wasmModule;

async function runExec(task: ExecTask): Promise<TaskOutcome> {
  const prepared = await prepareCell(task, wasm);
  return prepared.ok ? runExecSession({ ...task, catalog: openCatalog(task.catalog) }, wasm, prepared.source) : prepared.outcome;
}

export default async function runTask(task: Task): Promise<void> {
  // The pool may have taken the task back (this thread was held by another guest): then it runs elsewhere.
  if (task.claim && Atomics.compareExchange(new Int32Array(task.claim), 0, 0, CLAIM_STARTED) !== 0) {
    task.port.close();
    return;
  }
  task.port.postMessage({ t: "started", threadId } satisfies WorkerMessage);
  let outcome: TaskOutcome;
  try {
    outcome = task.kind === "exec" ? await runExec(task) : task.kind === "resume" ? await runResumeSession(task, wasm) : await runUnparkSession(task, wasm);
  } catch (err) {
    outcome = { status: "failed", error: `internal: ${(err as Error).message}`, code: "internal_error", outputBytes: task.outputBytesUsed };
  }
  outcome.vmStart ??= task.kind === "exec" ? "fresh" : "snapshot";
  const memory = memoryReport(currentWarmVms());
  if (memory) outcome.memory = memory;
  // The envelope's memory moves to the main thread rather than being copied.
  const env = outcome.status === "suspended" ? outcome.envelope : undefined;
  const transfer = env && env.byteOffset === 0 && env.byteLength === env.buffer.byteLength ? [env.buffer as ArrayBuffer] : [];
  task.port.postMessage({ t: "done", outcome } satisfies WorkerMessage, transfer);
  task.port.close();
}

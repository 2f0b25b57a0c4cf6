/**
 * Lowers this worker thread's OS scheduling priority when the pool asks (workerData.nice):
 * the pool runs the programs of sessions that compute (../pool/scheduler.ts, *heavy*) on
 * background lanes whose threads are niced, so on a busy machine the kernel gives the
 * cores to the other threads first (the lanes of light sessions, the sidecar's main thread
 * and anything else on the host) and a loop gets what is left. Niceness is per thread on
 * Linux: setpriority(2) with a thread id. Lowering needs no privilege; raising it back
 * would, so a lane's thread keeps its priority for life, and a replaced thread sets it
 * again. Elsewhere (no /proc/thread-self) the thread runs at normal priority.
 *
 * It also names the thread for the OS (`top -H`, `ps -L`, /proc/<pid>/task/<tid>/comm):
 * `codemode-worker`, or `codemode-bg` on a background lane; otherwise every thread of the
 * process is called `node`, and a worker's CPU could not be told from V8's helper threads'.
 */
import { readlinkSync, writeFileSync } from "node:fs";
import { setPriority } from "node:os";
import { workerData } from "node:worker_threads";

/** What happened: the nice value set, or why none was. */
export type PriorityOutcome = { nice: number } | { nice: 0; why: string };

function setNice(nice: number): PriorityOutcome {
  if (!(nice > 0)) return { nice: 0, why: "not asked" };
  try {
    // "<pid>/task/<tid>": the kernel's id of this thread.
    const tid = Number(readlinkSync("/proc/thread-self").split("/").pop());
    if (!Number.isInteger(tid) || tid <= 0) return { nice: 0, why: "no thread id" };
    setPriority(tid, Math.min(19, Math.floor(nice)));
    return { nice: Math.min(19, Math.floor(nice)) };
  } catch (err) {
    return { nice: 0, why: (err as Error).message };
  }
}

/** Set once, when the worker module loads. */
export const priority: PriorityOutcome = setNice((workerData as { nice?: number } | undefined)?.nice ?? 0);

try {
  // At most 15 characters; a thread may rename only itself.
  writeFileSync("/proc/thread-self/comm", priority.nice > 0 ? "codemode-bg" : "codemode-worker");
} catch {
  // not Linux: the thread keeps its name
}

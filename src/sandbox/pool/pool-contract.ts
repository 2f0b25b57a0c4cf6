/**
 * What the sandbox pool (./pool.ts) promises its callers: the events a task streams, the
 * handle that answers, suspends or cancels it, what a task is submitted as (and continued
 * as from a parked image), and the grace past a deadline before the host kills a thread.
 */
import type { ExecTask, GuestCatalog, NestedCallMessage, PlainError, RequestOp, ResumeTask, TaskOutcome, UnparkTask, WorkerMessage } from "./task-protocol.js";

export type CheckpointMessage = Extract<WorkerMessage, { t: "checkpoint" }>;

export type ExecEvents = {
  onOutput(kind: "text" | "json", data: string): void;
  onToolCall(call: NestedCallMessage): void;
  onRequest(reqId: string, op: RequestOp, payloadJson: string): void;
  onYield(callId: string, reason: string): void;
  /** The idle VM's checkpoint (a code-mode exec or wait that takes them). */
  onCheckpoint?(checkpoint: CheckpointMessage): void;
};

export type ExecHandle = {
  /** Settles with the outcome; never rejects. */
  outcome: Promise<TaskOutcome>;
  answer(callId: string, result: ({ ok: true; json: string } | { ok: false; error: PlainError }) & { secret?: true }): void;
  /**
   * Lets the VM parse a large answer's text (a string, or exactly its UTF-8 bytes, which
   * stay the caller's) while the caller validates it: `answer` with the same text, or
   * `unstage`, must follow in the same turn of the event loop (../worker/staged-answers.ts).
   */
  stage(callId: string, text: string | Uint8Array): void;
  unstage(callId: string): void;
  cancel(reason: string): void;
  /** Asks the VM to suspend at its next idle moment (drain); a computing guest finishes its slice first. */
  suspend(): void;
  /** Tells the VM that call `callId` awaits a person's approval (every attempt of the task is told). */
  approval(callId: string): void;
};

/**
 * Grace past a deadline or a cancel before the host stops trusting the interrupt handler
 * and terminates the thread: a guest that polls interrupts has stopped long before, so
 * only a native loop (e.g. a huge `Array.join`) is still running then. Under a second,
 * whatever `timeoutMs` is.
 */
export const KILL_GRACE_MS = 750;
export function killGraceMs(_timeoutMs: number): number {
  return KILL_GRACE_MS;
}

/** A task without its port (the pool makes one per attempt). */
export type Submission = (Omit<ExecTask, "port" | "catalog"> & { catalog: GuestCatalog }) | Omit<ResumeTask, "port">;

/** Hands a worker's streamed event (not a lifecycle message) to the exec's handlers. */
export function forwardEvent(m: WorkerMessage, events: ExecEvents): void {
  if (m.t === "output") events.onOutput(m.kind, m.data);
  else if (m.t === "call") events.onToolCall(m);
  else if (m.t === "request") events.onRequest(m.reqId, m.op, m.payloadJson);
  else if (m.t === "yield") events.onYield(m.callId, m.reason);
  else if (m.t === "checkpoint") events.onCheckpoint?.(m);
}

/** A VM's idle image, parked on the main thread by a worker that shares its thread. */
export type Parked = Extract<WorkerMessage, { t: "parked" }>;
/** The task that continues a run from its parked image (its port and the answers the image lacks are added when posted). */
export type Unpark = Omit<UnparkTask, "port" | "answers">;

/** The task that continues `submission`'s run from image `p`. */
export function unparkTask(submission: Submission, p: Parked): Unpark {
  return {
    kind: "unpark",
    parked: p.parked,
    pending: p.pending,
    limits: submission.limits,
    outputBytesUsed: p.outputBytes,
    deadlineAtMs: p.deadlineAtMs,
    allToolsJson: submission.kind === "exec" ? submission.catalog.allToolsJson : (submission.allToolsJson ?? "[]"),
    convenienceJson: submission.kind === "exec" ? submission.catalog.convenienceJson : (submission.convenienceJson ?? "[]"),
    ...(submission.kind === "exec" && submission.surface !== undefined ? { surface: submission.surface } : {}),
    ...(submission.record ? { record: true as const } : {}),
  };
}

/**
 * Messages between the sidecar's main thread and a pool worker running one exec or
 * one resumed segment of a suspended run (`wait`).
 * A discriminated union each way, plain data only; errors cross as {name, message}.
 * The task's own MessagePort carries them so output and tool calls stream in order,
 * and the final outcome travels last on the same port.
 */
import type { GuestCatalog, SharedCatalog } from "./shared-catalog.js";

export type { GuestCatalog };
import type { MessagePort } from "node:worker_threads";
import type { Language } from "../../shared/config.js";
import type { PendingKind, SuspendReason } from "../../shared/link-wire.js";
import type { Tape } from "../worker/tape-format.js";

export type { SuspendReason };

export type ErrorCodeName = "invalid_input" | "runtime_unavailable" | "timeout" | "output_limit_exceeded" | "snapshot_limit_exceeded" | "internal_error";

export type TaskLimits = {
  timeoutMs: number;
  memoryLimitBytes: number;
  maxOutputBytes: number;
  maxPendingToolCalls: number;
  maxSnapshotBytes: number;
  /** A VM idle this long on tool answers posts a `checkpoint` (../worker/idle-checkpoint.ts); absent: never. */
  checkpointAfterMs?: number;
};

export const EMPTY_GUEST_CATALOG: GuestCatalog = { staticJson: '{"mcp":[],"namespaces":[]}', allToolsJson: "[]", convenienceJson: "[]", needsContext: false };
/** A prelude's boot answer for no catalog and no run context. */
export const EMPTY_BOOT_JSON = `{"catalog":${EMPTY_GUEST_CATALOG.staticJson},"context":null}`;

export type ExecTask = {
  kind: "exec";
  port: MessagePort;
  source: string;
  language: Language;
  limits: TaskLimits;
  /** A worker receives a versioned catalog shared (./shared-catalog.ts) and opens it. */
  catalog: GuestCatalog | SharedCatalog;
  /** JSON text of the run context namespaces may reference ("null" when none needs it). */
  contextJson: string;
  /** Output bytes already used by earlier segments of this run. */
  outputBytesUsed: number;
  /**
   * Which guest prelude the VM gets: code mode's (default), Tool Search's reduced one
   * (`tool_search_code`), or Code Mode for MCP's (`codemode.run`, ../surfaces/mcp-run/prelude.ts).
   */
  surface?: TaskSurface;
  /** False: code mode without the session store's globals (a run with sessionStore false). */
  sessionStore?: false;
  /**
   * Start on an idle grown instance when there is one (../worker/warm-vms.ts): set by the
   * pool for a session whose recent exec grew its instance (./room-hints.ts).
   */
  roomy?: boolean;
} & CancelFlag;

/** Something a VM awaits from the host, by the id its guest-side promise waits on. */
export type { PendingKind };
export type PendingRef = { callId: string; kind: PendingKind; dueAtMs?: number };

/**
 * A host answer for call `callId`. `staged`: the text came earlier in a `stage` message on
 * the same port (so `json` is empty here) and the VM may already have parsed it
 * (../worker/staged-answers.ts).
 */
export type AnswerMessage = (
  | { t: "answer"; callId: string; ok: true; json: string; staged?: true }
  | { t: "answer"; callId: string; ok: false; error: PlainError }
) & {
  /** The gateway marked the answer secret: a replay record keeps that it came, not what it said (../worker/replay-tape.ts). */
  secret?: true;
};

/** A host answer for call `callId` as the VM takes it (the secret mark kept). */
export function answerMessage(callId: string, a: ({ ok: true; json: string } | { ok: false; error: PlainError }) & { secret?: true }): AnswerMessage {
  const base: AnswerMessage = a.ok ? { t: "answer", callId, ok: true, json: a.json } : { t: "answer", callId, ok: false, error: a.error };
  return a.secret ? { ...base, secret: true } : base;
}

/** Restores a suspended run's VM from its (already authenticated) snapshot and continues it. */
export type ResumeTask = {
  kind: "resume";
  port: MessagePort;
  /** The snapshot envelope, its seal already checked by the main thread. */
  envelope: Uint8Array;
  /** What the VM awaited when it was snapshotted. */
  pending: PendingRef[];
  /** Answers delivered right after the restore, in order. */
  answers: AnswerMessage[];
  /** ALL_TOOLS and convenience names of the run's current catalog, for a program that first reads them after the restore. */
  allToolsJson?: string;
  convenienceJson?: string;
  limits: TaskLimits;
  outputBytesUsed: number;
} & CancelFlag;

/** A raw VM image a worker parked on the main thread, restorable on any worker. */
export type ParkedVm = {
  /** The memory up to its last non-zero byte (the rest, up to `memoryBytes`, is zero). */
  memory: Uint8Array;
  memoryBytes: number;
  stackPointer: number;
  runtimePtr: number;
  contextPtr: number;
  extensions: Array<{ name: string; memoryBase: number; tableBase: number; initFn: string }>;
  guestToken: number;
};

/**
 * Continues a VM whose worker thread was killed for another run's runaway loop, from the
 * copy it parked while idle: the same segment goes on, on another thread.
 */
export type UnparkTask = {
  kind: "unpark";
  port: MessagePort;
  parked: ParkedVm;
  pending: PendingRef[];
  /** Answers sent to the lost VM after it parked, delivered again in order. */
  answers: AnswerMessage[];
  limits: TaskLimits;
  outputBytesUsed: number;
  /** The segment's deadline (epoch ms), unchanged by the move. */
  deadlineAtMs: number;
  allToolsJson?: string;
  convenienceJson?: string;
  surface?: TaskSurface;
} & CancelFlag;

export type Task = ExecTask | ResumeTask | UnparkTask;

/** The guest preludes a task may run on; `tool_search` and `mcp_run` never suspend. */
export type TaskSurface = "code" | "tool_search" | "mcp_run";

/**
 * A 4-byte SharedArrayBuffer the pool gives every task: the main thread stores 1 in it to
 * cancel the task. The VM's interrupt handler reads it, so a cancel stops a guest at its
 * next interrupt poll even while it computes (when the worker's event loop cannot receive
 * messages).
 */
/**
 * `cancelFlag`: set by the main thread to cancel (read by the interrupt handler).
 * `claim`: one Int32 saying who owns the task's run, changed only by compare-and-swap:
 * 0 when posted; the worker sets 1 (CLAIM_STARTED) when it starts the task, the pool 2
 * (CLAIM_WITHDRAWN) when it withdraws it first (./lanes.ts). An idle VM that
 * parked its image publishes CLAIM_PARKED with the image's sequence number (`parkedClaim`);
 * from that exact value the pool may set 3 (CLAIM_MOVED) and continue the run elsewhere
 * from that image, and the VM, when it next wakes, swaps it back to 1 or, finding 3,
 * gives the run up without running anything.
 */
export const CLAIM_STARTED = 1;
export const CLAIM_WITHDRAWN = 2;
export const CLAIM_MOVED = 3;
export const CLAIM_PARKED = 4;
/** The claim word of a VM idle with its parked image number `seq`. */
export function parkedClaim(seq: number): number {
  return CLAIM_PARKED | ((seq & 0xfffff) << 3);
}

export type CancelFlag = {
  cancelFlag?: SharedArrayBuffer;
  claim?: SharedArrayBuffer /** Published while the task's VM holds the thread. */;
  taskId?: number;
  /** Keep what the VM consumes for replay (../worker/replay-tape.ts): the outcome carries its tape. */
  record?: true;
};

export type PlainError = { name: string; message: string };

export type CallVia = "tools" | "mcp" | "ns";
export type NestedCallMessage = Extract<WorkerMessage, { t: "call" }>;
/** Catalog requests the sidecar answers itself. */
export type RequestOp = "search" | "describe" | "api_list" | "api_read" | "mcp_api" | "store" | "load";

/**
 * Worker → main. `rx` on a message the VM sent: how many answers the worker had received
 * on the task's port by then (the pool forgets answers a parked image holds, ./image-answers.ts).
 */
export type WorkerMessage =
  | { t: "started"; threadId: number }
  /** The host may kill the thread if this task still runs at untilMs (plus grace). */
  | { t: "watch"; untilMs: number }
  | { t: "output"; kind: "text" | "json"; data: string; rx?: number }
  /**
   * A nested call: `tools` (tools.call and convenience names; target is the catalog id),
   * `mcp` (MCP.<server>.*; target is the exact MCP catalog id), `ns` (an internal
   * namespace member; target is the namespace id, path the member, input the arguments).
   */
  | { t: "call"; callId: string; via: CallVia; target: string; path: string; inputJson: string; rx?: number }
  | { t: "request"; reqId: string; op: RequestOp; payloadJson: string; rx?: number }
  | { t: "yield"; callId: string; reason: string; rx?: number }
  /** The VM is idle on a shared thread: here is its current image (memory transferred). */
  | {
      t: "parked";
      parked: ParkedVm;
      pending: PendingRef[];
      outputBytes: number;
      deadlineAtMs: number /** The image's number in this task (see `claim`). */;
      seq: number;
      rx: number;
    }
  /**
   * The VM has waited on tool answers for checkpointAfterMs and goes on waiting: its
   * snapshot (unsealed, memory transferred) and what it awaits, for the main thread to store.
   */
  | { t: "checkpoint"; envelope: Uint8Array; pending: PendingRef[]; outputBytes: number }
  | { t: "done"; outcome: TaskOutcome };

/** Main → worker. */
export type MainMessage =
  | AnswerMessage
  /**
   * A large answer's text as UTF-8 (its buffer transferred), sent before the main thread
   * has validated it so that the VM parses it meanwhile; settles nothing. Its `answer`
   * (with `staged`) or `unstage` follows on the same port. Neither counts as an answer
   * received (`rx`).
   */
  | { t: "stage"; callId: string; bytes: Uint8Array }
  /** The staged text was refused: the VM forgets what it parsed; the call stays pending. */
  | { t: "unstage"; callId: string }
  | { t: "cancel"; reason: string }
  /** Suspend as soon as the VM is idle with work pending (the sidecar is draining). */
  | { t: "suspend" }
  /**
   * Call `callId` awaits a person's approval: when every call the VM awaits does, and no
   * timer is due before the deadline, the VM suspends with reason `approval` at once.
   */
  | { t: "approval"; callId: string };

/**
 * How a task's VM started: an idle instance overwritten with a prepared image or with a
 * resumed or moved run's state (`reused`), a new instance restored from a prepared image
 * (`restored`), see ../worker/warm-vms.ts; `fresh` (created and the prelude run), or
 * `snapshot` (a new instance for a resumed or moved run). For metrics.
 */
export type VmStart = "reused" | "restored" | "fresh" | "snapshot";

export type TaskOutcome = (
  | { status: "completed"; valueJson: string; outputBytes: number }
  | { status: "failed"; error: string; code?: ErrorCodeName; outputBytes: number }
  | {
      status: "suspended";
      reason: SuspendReason;
      /** The unsealed snapshot envelope. */
      envelope: Uint8Array;
      /** Everything the VM still awaits (answered or not: answers in flight were not consumed). */
      pending: PendingRef[];
      outputBytes: number;
      /** How the snapshot was stored, for logs and benchmarks. */
      snapshot: { encoding: "delta" | "plain"; memoryBytes: number; changedPages: number; encodeMs: number };
    }
) & {
  vmStart?: VmStart;
  /** The run grew its instance's memory past what it started with (the pool remembers it for the session: ./room-hints.ts). */
  grew?: boolean;
  /** How long the segment's VM held its worker thread (ms): the pool's CPU share per session (./cpu-budget.ts). */
  cpuMs?: number;
  /** Set by the pool: ms from submission to the first start on a thread, and times the run moved to another thread (moves, continuations, resubmissions). */
  queuedMs?: number;
  moves?: number;
  /** The worker thread's memory, at most once a second (../worker/memory-report.ts). */
  memory?: WorkerMemory;
  /** What the VM consumed, when the task asked for a record (../worker/replay-tape.ts). */
  tape?: Tape;
  /** A resume whose snapshot was made by another build: no VM ran (../suspend/rebuild.ts). */
  otherBuild?: true;
};

/** What a worker thread holds, in bytes: its V8 heap, and the QuickJS memories it keeps for reuse. */
export type WorkerMemory = {
  heapUsed: number;
  heapTotal: number;
  /** Memory outside the V8 heap that V8 is told of (array buffers, WebAssembly memories of live instances). */
  external: number;
  /** Idle instances kept for a reset. */
  spares: number;
  /** Prepared images and grown variants. */
  images: number;
  /** The VM that compiles programs. */
  compiler: number;
};

/**
 * The sidecar's piscina pool of QuickJS workers, and the host's own wall-clock kill.
 *
 * Each exec is a task with its own MessagePort (output, tool calls and the outcome
 * stream over it, in order). A worker hosts several tasks at once, because a VM that
 * awaits tool results does not use its thread. A native loop that ignores QuickJS's
 * interrupt handler blocks its thread, so the host watches every started task: past
 * its deadline plus a grace period the worker thread is terminated, piscina starts a
 * replacement, the runaway run fails with `timeout`, and any other task on that
 * thread that had not yet reported anything to its gateway (no output, no tool call:
 * queued, compiling, or computing) is submitted again from the start, so no other run
 * fails and nothing the gateway saw happens twice.
 */
import { MessageChannel, type MessagePort } from "node:worker_threads";
import { readFile } from "node:fs/promises";
import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";
import { Piscina } from "piscina";
import type { Logger } from "../shared/logger.js";
import { MCP_RUN_PROBE } from "./mcp-run/probe.js";
import { shareCatalog } from "./shared-catalog.js";
import { EMPTY_GUEST_CATALOG, type ExecTask, type GuestCatalog, type MainMessage, type NestedCallMessage, type PlainError, type RequestOp, type ResumeTask, type Task, type TaskOutcome, type UnparkTask, type VmStart, type WorkerMessage } from "./task-protocol.js";

export type PoolOptions = {
  threads?: number;
  /** Execs one worker hosts at once (VMs awaiting tools do not use the thread). */
  execsPerWorker?: number;
  log: Logger;
};

export type ExecEvents = {
  onOutput(kind: "text" | "json", data: string): void;
  onToolCall(call: NestedCallMessage): void;
  onRequest(reqId: string, op: RequestOp, payloadJson: string): void;
  onYield(callId: string, reason: string): void;
};

export type ExecHandle = {
  /** Settles with the outcome; never rejects. */
  outcome: Promise<TaskOutcome>;
  answer(callId: string, result: { ok: true; json: string } | { ok: false; error: PlainError }): void;
  cancel(reason: string): void;
  /** Asks the VM to suspend at its next idle moment (drain); a computing guest finishes its slice first. */
  suspend(): void;
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

/** How a cancelled guest's failure starts (the worker's message, completed here with the reason). */
const CANCELLED_PREFIX = "code mode exec was cancelled: ";

const WORKER_FILE = fileURLToPath(new URL("./worker/worker.js", import.meta.url));
/** Large enough that parser and JSON nesting limits trip inside QuickJS first. */
const WORKER_STACK_MB = 16;

/** A task without its port (the pool makes one per attempt). */
export type Submission = (Omit<ExecTask, "port" | "catalog"> & { catalog: GuestCatalog }) | Omit<ResumeTask, "port">;

export class SandboxPool {
  private readonly piscina: Piscina;
  private readonly log: Logger;
  private closed = false;
  readonly threads: number;
  /** Execs the pool runs at once: threads times execs per worker. */
  readonly slots: number;
  /** How tasks' VMs started (worker/warm-vms.ts), for metrics. */
  readonly vmStarts: Record<VmStart, number> = { reused: 0, restored: 0, fresh: 0, snapshot: 0 };
  /** Execs that may wait for a free worker slot before new ones are refused: two more rounds of every slot. */
  readonly maxQueue: number;

  private constructor(piscina: Piscina, threads: number, slots: number, log: Logger) {
    this.piscina = piscina;
    this.threads = threads;
    this.slots = slots;
    this.maxQueue = slots * 2;
    this.log = log;
  }

  /** True when the queue is full: a new exec is refused (RESOURCE_EXHAUSTED) rather than left to hang. */
  get saturated(): boolean {
    return this.piscina.queueSize >= this.maxQueue;
  }

  static async create(options: PoolOptions): Promise<SandboxPool> {
    const bytes = await readFile(new URL(import.meta.resolve("quickjs-wasi/quickjs.wasm")));
    const wasmModule = await WebAssembly.compile(bytes);
    const threads = Math.max(1, options.threads ?? availableParallelism());
    const piscina = new Piscina({
      filename: WORKER_FILE,
      minThreads: threads,
      maxThreads: threads,
      idleTimeout: Number.MAX_SAFE_INTEGER,
      concurrentTasksPerWorker: Math.max(1, options.execsPerWorker ?? 8),
      workerData: { wasmModule },
      resourceLimits: { stackSizeMb: WORKER_STACK_MB },
      // Guest code runs in workers; keep the process's environment out of them.
      env: {},
      atomics: "disabled",
    });
    piscina.on("error", (err: unknown) => options.log.error({ err }, "pool worker error"));
    return new SandboxPool(piscina, threads, threads * Math.max(1, options.execsPerWorker ?? 8), options.log);
  }

  get utilization(): number {
    return this.piscina.utilization;
  }

  /** Tasks waiting for a free slot on a worker (metrics). */
  get queueSize(): number {
    return this.piscina.queueSize;
  }

  exec(submission: Submission, events: ExecEvents): ExecHandle {
    let resolveOutcome!: (o: TaskOutcome) => void;
    const outcome = new Promise<TaskOutcome>((r) => (resolveOutcome = r));
    let port: MessagePort | undefined;
    let finished = false;
    let cancelledReason: string | undefined;
    const backlog: MainMessage[] = [];
    const cancelFlag = new SharedArrayBuffer(4);
    /** The VM's latest idle image on a shared thread, and answers sent to it since. */
    let parked: Extract<WorkerMessage, { t: "parked" }> | undefined;
    let answersSinceParked: Array<Extract<MainMessage, { t: "answer" }>> = [];
    /** Re-arms the running attempt's kill timer (set per attempt). */
    let killAfter: ((ms: number) => void) | undefined;
    const finish = (o: TaskOutcome) => {
      if (finished) return;
      finished = true;
      port?.close();
      // A guest stopped through the shared flag knows it was cancelled, not why: say why.
      if (cancelledReason !== undefined && o.status === "failed" && o.error.startsWith(CANCELLED_PREFIX)) o = { ...o, error: `${CANCELLED_PREFIX}${cancelledReason}` };
      resolveOutcome(o);
    };

    const attempt = (tries: number, unpark?: Omit<UnparkTask, "port">) => {
      const channel = new MessageChannel();
      port = channel.port1;
      let threadId: number | undefined;
      let started = false;
      /** The task reported something the gateway sees: running it again would repeat it. */
      let emitted = false;
      let killTimer: NodeJS.Timeout | undefined;
      const armKill = (inMs: number) => {
        clearTimeout(killTimer);
        killTimer = setTimeout(() => {
          if (finished) return;
          this.log.warn({ threadId, timeoutMs: submission.limits.timeoutMs }, "guest ignored its deadline; terminating its worker thread");
          finish({
            status: "failed",
            error: `code mode exec timed out after ${submission.limits.timeoutMs} ms (the sandbox stopped a loop that ignored interrupts).`,
            code: "timeout",
            outputBytes: submission.outputBytesUsed,
          });
          this.terminateThread(threadId);
        }, inMs + killGraceMs(submission.limits.timeoutMs));
        killTimer.unref();
      };
      const startTimer = setTimeout(() => {
        if (!started) finish({ status: "failed", error: "no sandbox worker became free in time.", code: "runtime_unavailable", outputBytes: submission.outputBytesUsed });
      }, submission.limits.timeoutMs + killGraceMs(submission.limits.timeoutMs));
      startTimer.unref();

      channel.port1.on("message", (m: WorkerMessage) => {
        try {
          this.onWorkerMessage(m, events, finished);
        } catch (err) {
          this.log.error({ err, message: m.t }, "handling a worker message failed; the exec is failed, the sidecar keeps serving");
          finish({ status: "failed", error: "internal: the sidecar could not handle a request from the program.", code: "internal_error", outputBytes: submission.outputBytesUsed });
          return;
        }
        switch (m.t) {
          case "output":
          case "call":
          case "request":
          case "yield":
            emitted = true;
            // The VM moved on since it parked: that image would repeat what the gateway saw.
            parked = undefined;
            break;
          case "parked":
            parked = m;
            answersSinceParked = [];
            break;
          case "started":
            started = true;
            threadId = m.threadId;
            clearTimeout(startTimer);
            for (const b of backlog.splice(0)) channel.port1.postMessage(b);
            armKill(cancelledReason !== undefined ? 0 : submission.limits.timeoutMs);
            killAfter = armKill;
            break;
          case "watch":
            // The worker moved its own deadline (the VM got the thread, or a snapshot is
            // being encoded): the kill follows it, with the same grace.
            if (started) armKill(Math.max(0, m.untilMs - Date.now()));
            break;
          case "done":
            clearTimeout(killTimer);
            if (m.outcome.vmStart) this.vmStarts[m.outcome.vmStart]++;
            finish(m.outcome);
            break;
        }
      });

      // A versioned catalog travels shared, not copied (./shared-catalog.ts).
      const posted = submission.kind === "exec" ? { ...submission, catalog: shareCatalog(submission.catalog) } : submission;
      const task = (unpark ? { ...unpark, port: channel.port2, cancelFlag } : { ...posted, port: channel.port2, cancelFlag }) as Task;
      this.piscina.run(task, { transferList: [channel.port2] }).then(
        () => undefined,
        (err: unknown) => {
          clearTimeout(startTimer);
          clearTimeout(killTimer);
          if (finished) return;
          if (!emitted && !unpark && !this.closed && tries < 3) {
            // The thread died (another run's loop) before this task reported anything: run it elsewhere.
            this.log.info({ tries, started }, "resubmitting a task whose worker was replaced before it reported anything");
            channel.port1.close();
            attempt(tries + 1);
            return;
          }
          if (parked && !this.closed && tries < 3) {
            // The thread died for a neighbour while this VM was idle: continue it elsewhere
            // from the image it parked, with the answers sent since.
            const p = parked;
            this.log.info({ tries, pending: p.pending.length }, "continuing a run whose worker was killed for another run, from its parked image");
            channel.port1.close();
            parked = undefined;
            attempt(tries + 1, {
              kind: "unpark",
              parked: p.parked,
              pending: p.pending,
              answers: answersSinceParked.splice(0),
              limits: submission.limits,
              outputBytesUsed: p.outputBytes,
              deadlineAtMs: p.deadlineAtMs,
              allToolsJson: submission.kind === "exec" ? submission.catalog.allToolsJson : (submission.allToolsJson ?? "[]"),
              convenienceJson: submission.kind === "exec" ? submission.catalog.convenienceJson : (submission.convenienceJson ?? "[]"),
              ...(submission.kind === "exec" && submission.surface !== undefined ? { surface: submission.surface } : {}),
            });
            return;
          }
          const reason = this.closed ? "the sandbox is shutting down" : (err as Error)?.message ?? String(err);
          finish({
            status: "failed",
            error: `the QuickJS worker running this exec stopped: ${reason}`,
            code: "runtime_unavailable",
            outputBytes: submission.outputBytesUsed,
          });
        },
      );
    };
    attempt(0);

    const send = (m: MainMessage) => {
      if (finished || !port) return;
      port.postMessage(m);
    };
    return {
      outcome,
      answer: (callId, result) => {
        const m: Extract<MainMessage, { t: "answer" }> = result.ok ? { t: "answer", callId, ok: true, json: result.json } : { t: "answer", callId, ok: false, error: result.error };
        if (parked) answersSinceParked.push(m);
        send(m);
      },
      suspend: () => {
        send({ t: "suspend" });
        backlog.push({ t: "suspend" });
      },
      cancel: (reason) => {
        if (cancelledReason !== undefined) return;
        cancelledReason = reason;
        // The flag reaches a computing guest at its next interrupt poll; the message
        // carries the reason; a native loop is killed after the grace.
        Atomics.store(new Int32Array(cancelFlag), 0, 1);
        send({ t: "cancel", reason });
        backlog.push({ t: "cancel", reason });
        killAfter?.(0);
      },
    };
  }

  /** Forwards a worker's streamed events (not the lifecycle ones) to the exec's handlers. */
  private onWorkerMessage(m: WorkerMessage, events: ExecEvents, finished: boolean): void {
    if (finished) return;
    if (m.t === "output") events.onOutput(m.kind, m.data);
    else if (m.t === "call") events.onToolCall(m);
    else if (m.t === "request") events.onRequest(m.reqId, m.op, m.payloadJson);
    else if (m.t === "yield") events.onYield(m.callId, m.reason);
  }

  private terminateThread(threadId: number | undefined): void {
    const worker = this.piscina.threads.find((w) => w.threadId === threadId);
    if (worker) void worker.terminate();
  }

  /**
   * Runs `return 1` once on each guest prelude (code mode's and Tool Search's) and
   * rejects with the reason when the pool cannot: workers that never start, a prelude
   * that does not compile, QuickJS that cannot create a VM. Bounded by the task timeout.
   */
  async probe(): Promise<void> {
    const limits = { timeoutMs: 10_000, memoryLimitBytes: 16 * 1024 * 1024, maxOutputBytes: 1_024, maxPendingToolCalls: 1, maxSnapshotBytes: 1_024 };
    const ignore: ExecEvents = { onOutput() {}, onToolCall() {}, onRequest() {}, onYield() {} };
    const outcomes = await Promise.all(
      (["code", "tool_search", "mcp_run"] as const).map(
        (surface) =>
          this.exec({ kind: "exec", source: "return 1", language: "javascript", limits, catalog: EMPTY_GUEST_CATALOG, contextJson: "null", outputBytesUsed: 0, surface, ...(surface === "mcp_run" ? MCP_RUN_PROBE : {}) }, ignore).outcome,
      ),
    );
    for (const o of outcomes) if (o.status !== "completed" || o.valueJson !== "1") throw new Error(o.status === "failed" ? o.error : `the probe program ended ${o.status}`);
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.piscina.destroy();
  }
}

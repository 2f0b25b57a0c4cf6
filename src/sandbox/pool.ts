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
import type { ExecTask, MainMessage, NestedCallMessage, PlainError, RequestOp, ResumeTask, Task, TaskOutcome, WorkerMessage } from "./task-protocol.js";

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
};

/** Grace past the deadline before the host stops trusting the interrupt handler. */
export function killGraceMs(timeoutMs: number): number {
  return Math.max(500, Math.round(timeoutMs / 2));
}

const WORKER_FILE = fileURLToPath(new URL("./worker/worker.js", import.meta.url));
/** Large enough that parser and JSON nesting limits trip inside QuickJS first. */
const WORKER_STACK_MB = 16;

/** A task without its port (the pool makes one per attempt). */
export type Submission = Omit<ExecTask, "port"> | Omit<ResumeTask, "port">;

export class SandboxPool {
  private readonly piscina: Piscina;
  private readonly log: Logger;
  private closed = false;
  readonly threads: number;

  private constructor(piscina: Piscina, threads: number, log: Logger) {
    this.piscina = piscina;
    this.threads = threads;
    this.log = log;
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
    return new SandboxPool(piscina, threads, options.log);
  }

  get utilization(): number {
    return this.piscina.utilization;
  }

  exec(submission: Submission, events: ExecEvents): ExecHandle {
    let resolveOutcome!: (o: TaskOutcome) => void;
    const outcome = new Promise<TaskOutcome>((r) => (resolveOutcome = r));
    let port: MessagePort | undefined;
    let finished = false;
    let cancelledReason: string | undefined;
    const backlog: MainMessage[] = [];
    const finish = (o: TaskOutcome) => {
      if (finished) return;
      finished = true;
      port?.close();
      resolveOutcome(o);
    };

    const attempt = (tries: number) => {
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
            break;
          case "started":
            started = true;
            threadId = m.threadId;
            clearTimeout(startTimer);
            for (const b of backlog.splice(0)) channel.port1.postMessage(b);
            armKill(submission.limits.timeoutMs);
            break;
          case "watch":
            // The worker moved its own deadline (the VM got the thread, or a snapshot is
            // being encoded): the kill follows it, with the same grace.
            if (started) armKill(Math.max(0, m.untilMs - Date.now()));
            break;
          case "done":
            clearTimeout(killTimer);
            finish(m.outcome);
            break;
        }
      });

      const task = { ...submission, port: channel.port2 } as Task;
      this.piscina.run(task, { transferList: [channel.port2] }).then(
        () => undefined,
        (err: unknown) => {
          clearTimeout(startTimer);
          clearTimeout(killTimer);
          if (finished) return;
          if (!emitted && !this.closed && tries < 3) {
            // The thread died (another run's loop) before this task reported anything: run it elsewhere.
            this.log.info({ tries, started }, "resubmitting a task whose worker was replaced before it reported anything");
            channel.port1.close();
            attempt(tries + 1);
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
      answer: (callId, result) =>
        send(result.ok ? { t: "answer", callId, ok: true, json: result.json } : { t: "answer", callId, ok: false, error: result.error }),
      cancel: (reason) => {
        if (cancelledReason !== undefined) return;
        cancelledReason = reason;
        send({ t: "cancel", reason });
        backlog.push({ t: "cancel", reason });
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

  async close(): Promise<void> {
    this.closed = true;
    await this.piscina.destroy();
  }
}

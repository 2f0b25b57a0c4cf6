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
import { HOG_MS, Lanes, type Lane } from "./lanes.js";
import { FairScheduler } from "./scheduler.js";
import { CpuBudget, WINDOW_MS } from "./cpu-budget.js";
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

/** How often one task may be moved off hogged lanes before it just waits where it is. */
const MAX_MOVES = 8;

/** How a cancelled guest's failure starts (the worker's message, completed here with the reason). */
const CANCELLED_PREFIX = "code mode exec was cancelled: ";

const WORKER_FILE = fileURLToPath(new URL("./worker/worker.js", import.meta.url));
/** Large enough that parser and JSON nesting limits trip inside QuickJS first. */
const WORKER_STACK_MB = 16;

/** A task without its port (the pool makes one per attempt). */
export type Submission = (Omit<ExecTask, "port" | "catalog"> & { catalog: GuestCatalog }) | Omit<ResumeTask, "port">;

export class SandboxPool {
  private readonly lanes: Lanes;
  private readonly budget: CpuBudget;
  private readonly scheduler: FairScheduler;
  /** Ids of attempts, which a worker publishes while its VM holds the thread (./lanes.ts). */
  private nextTaskId = 0;
  private readonly log: Logger;
  private closed = false;
  readonly threads: number;
  /** Execs the pool runs at once: threads times execs per worker. */
  readonly slots: number;
  /** How tasks' VMs started (worker/warm-vms.ts), for metrics. */
  readonly vmStarts: Record<VmStart, number> = { reused: 0, restored: 0, fresh: 0, snapshot: 0 };
  /** Execs that may wait for a free worker slot before new ones are refused: two more rounds of every slot. */
  readonly maxQueue: number;

  private constructor(lanes: Lanes, threads: number, slots: number, log: Logger) {
    this.lanes = lanes;
    this.budget = new CpuBudget(threads);
    this.scheduler = new FairScheduler(lanes, slots / threads, (tenant) => this.budget.usedMs(tenant), WINDOW_MS * threads);
    this.threads = threads;
    this.slots = slots;
    this.maxQueue = slots * 2;
    this.log = log;
  }

  /** True when the queue is full: a new exec is refused (RESOURCE_EXHAUSTED) rather than left to hang. */
  get saturated(): boolean {
    return this.lanes.queueSize + this.scheduler.size >= this.maxQueue;
  }

  static async create(options: PoolOptions): Promise<SandboxPool> {
    const bytes = await readFile(new URL(import.meta.resolve("quickjs-wasi/quickjs.wasm")));
    const wasmModule = await WebAssembly.compile(bytes);
    const threads = Math.max(1, options.threads ?? availableParallelism());
    const execsPerWorker = Math.max(1, options.execsPerWorker ?? 8);
    const lanes = new Lanes(threads, { filename: WORKER_FILE, execsPerWorker, wasmModule, stackSizeMb: WORKER_STACK_MB });
    lanes.onError((err: unknown) => options.log.error({ err }, "pool worker error"));
    return new SandboxPool(lanes, threads, threads * execsPerWorker, options.log);
  }

  get utilization(): number {
    return this.lanes.utilization;
  }

  /** Tasks waiting for a free slot on a worker (metrics). */
  get queueSize(): number {
    return this.lanes.queueSize + this.scheduler.size;
  }

  /** Why `tenant` may not start a segment now (over its CPU share while others wait), or undefined. */
  cpuRefusal(tenant: string): string | undefined {
    const waiting = this.scheduler.waitingFor(tenant);
    if (waiting >= this.maxQueue / 2) return `this session already has ${waiting} execs waiting for a worker, half of this sidecar's queue; wait for them to finish`;
    return this.budget.refusal(tenant);
  }

  /** Runs a task; `tenant` (the session, see ./cpu-budget.ts) is charged the thread time its VM held. */
  exec(submission: Submission, events: ExecEvents, tenant = ""): ExecHandle {
    this.budget.started(tenant);
    /** When the running attempt's VM got its thread: a killed one is charged from then. */
    let startedAt = 0;
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
    /** Times the task was withdrawn from a hogged lane before it started. */
    let moves = 0;
    /** Re-arms the running attempt's kill timer (set per attempt). */
    let killAfter: ((ms: number) => void) | undefined;
    const finish = (o: TaskOutcome) => {
      if (finished) return;
      finished = true;
      port?.close();
      // A guest stopped through the shared flag knows it was cancelled, not why: say why.
      if (cancelledReason !== undefined && o.status === "failed" && o.error.startsWith(CANCELLED_PREFIX)) o = { ...o, error: `${CANCELLED_PREFIX}${cancelledReason}` };
      this.budget.ended(tenant, o.cpuMs ?? (startedAt > 0 ? Date.now() - startedAt : 0));
      this.scheduler.pump();
      resolveOutcome(o);
    };

    // A task waits in the fair queue (./scheduler.ts) until a lane has room; until then
    // it ends there if it was cancelled or its time (from this submission) ran out.
    const attempt = (tries: number, unpark?: Omit<UnparkTask, "port">) => {
      const queuedUntil = Date.now() + submission.limits.timeoutMs + killGraceMs(submission.limits.timeoutMs);
      this.scheduler.submit({
        tenant,
        run: (lane) => attemptOn(lane, tries, unpark),
        gone: () => {
          if (finished) return true;
          if (cancelledReason !== undefined) finish({ status: "failed", error: `${CANCELLED_PREFIX}${cancelledReason}`, code: "internal_error", outputBytes: submission.outputBytesUsed });
          else if (Date.now() > queuedUntil) finish({ status: "failed", error: "no sandbox worker became free in time.", code: "runtime_unavailable", outputBytes: submission.outputBytesUsed });
          return finished;
        },
      });
    };
    const attemptOn = (lane: Lane, tries: number, unpark?: Omit<UnparkTask, "port">) => {
      const channel = new MessageChannel();
      port = channel.port1;
      let threadId: number | undefined;
      let started = false;
      /** The task reported something the gateway sees: running it again would repeat it. */
      let emitted = false;
      // The attempt's claim: 0 posted, 1 started by the worker, 2 withdrawn by the pool
      // (its lane got hogged before it started; see ./lanes.ts).
      const taskId = (this.nextTaskId = (this.nextTaskId % 2_000_000_000) + 1);
      lane.enter(tenant, taskId);
      let onLane = true;
      const leaveLane = () => {
        if (!onLane) return;
        onLane = false;
        lane.leave(tenant, taskId);
        // After this turn: the task's "done" (and its CPU charge) is usually handled by then.
        setImmediate(() => this.scheduler.pump());
      };
      const claim = new Int32Array(new SharedArrayBuffer(4));
      /** Withdrawn before it started: another attempt runs the task; ignore this one. */
      let superseded = false;
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
        if (superseded) return;
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
            startedAt = Date.now();
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
      const task = (unpark ? { ...unpark, port: channel.port2, cancelFlag, claim: claim.buffer, taskId } : { ...posted, port: channel.port2, cancelFlag, claim: claim.buffer, taskId }) as Task;
      // Not started yet and its lane is hogged by another guest: run it on a free lane instead.
      const watch = setInterval(() => {
        if (finished || Atomics.load(claim, 0) !== 0 || moves >= MAX_MOVES) return clearInterval(watch);
        if (!lane.hogged || !this.lanes.anyFreeBesides(lane)) return;
        if (Atomics.compareExchange(claim, 0, 0, 2) !== 0) return clearInterval(watch);
        clearInterval(watch);
        superseded = true;
        moves++;
        clearTimeout(startTimer);
        leaveLane();
        channel.port1.close();
        this.log.info({ lane: lane.index, heldMs: lane.heldMs() }, "moving a task that had not started off a lane another guest holds");
        attempt(tries, unpark);
      }, HOG_MS);
      watch.unref();
      lane.piscina.run(task, { transferList: [channel.port2] }).then(
        () => leaveLane(),
        (err: unknown) => {
          leaveLane();
          clearInterval(watch);
          if (superseded) return;
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
    this.lanes.terminate(threadId);
  }

  /**
   * Runs `return 1` on each guest prelude (code mode's, Tool Search's, codemode.run's) and
   * rejects with the reason when the pool cannot: workers that never start, a prelude
   * that does not compile, QuickJS that cannot create a VM. Bounded by the task timeout.
   *
   * It also warms the pool for the first execs: code mode's probe runs once per thread
   * (submitted first, so each lands on a different one), so every worker has compiled
   * that prelude and prepared its VM image before the sidecar says it is ready, and the
   * first exec on any thread skips that (~100 ms cold). The other surfaces run once each.
   */
  async probe(): Promise<void> {
    const limits = { timeoutMs: 10_000, memoryLimitBytes: 16 * 1024 * 1024, maxOutputBytes: 1_024, maxPendingToolCalls: 1, maxSnapshotBytes: 1_024 };
    const ignore: ExecEvents = { onOutput() {}, onToolCall() {}, onRequest() {}, onYield() {} };
    const surfaces = [...Array.from({ length: this.threads }, () => "code" as const), "tool_search" as const, "mcp_run" as const];
    const outcomes = await Promise.all(
      surfaces.map(
        (surface) =>
          this.exec({ kind: "exec", source: "return 1", language: "javascript", limits, catalog: EMPTY_GUEST_CATALOG, contextJson: "null", outputBytesUsed: 0, surface, ...(surface === "mcp_run" ? MCP_RUN_PROBE : {}) }, ignore).outcome,
      ),
    );
    for (const o of outcomes) if (o.status !== "completed" || o.valueJson !== "1") throw new Error(o.status === "failed" ? o.error : `the probe program ended ${o.status}`);
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.lanes.destroy();
  }
}

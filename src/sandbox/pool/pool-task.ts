/**
 * One task of the sandbox pool (./pool.ts): its way through the fair queue to a lane, and
 * every attempt at running it there.
 *
 * An attempt posts the task to its lane's worker with a MessagePort of its own (output,
 * tool calls and the outcome stream over it, in order) and watches it: past its deadline
 * plus a grace the worker thread is terminated (only the guest that holds the thread is
 * blamed); a task not yet started, or a VM idle with its image parked, moves off a lane
 * another guest holds; a task that joined a busy lane and has not started within its leash
 * is placed on another; a task whose thread died for a neighbour before it reported anything
 * is submitted again, and one that had reported is continued from its parked image with the
 * answers that image lacks (./image-answers.ts). Whatever happens, the task settles once.
 */
import { MessageChannel, type MessagePort } from "node:worker_threads";
import { HOG_MS, type Lanes, type Lane } from "./lanes.js";
import { forwardEvent, killGraceMs, unparkTask, type ExecEvents, type ExecHandle, type Parked, type Submission, type Unpark } from "./pool-contract.js";
import { ImageAnswers } from "./image-answers.js";
import type { PoolHealthMonitor } from "./pool-health.js";
import type { RoomHints } from "./room-hints.js";
import { LOOP_MS, PACK_LEASH_MS, type FairScheduler } from "./scheduler.js";
import type { CpuBudget } from "./cpu-budget.js";
import type { Logger } from "../../shared/logger.js";
import { shareCatalog } from "./shared-catalog.js";
import {
  CLAIM_MOVED,
  CLAIM_WITHDRAWN,
  answerMessage,
  parkedClaim,
  type MainMessage,
  type Task,
  type TaskOutcome,
  type VmStart,
  type WorkerMessage,
} from "./task-protocol.js";

/** How often one task may be moved off hogged lanes before it just waits where it is. */
const MAX_MOVES = 8;
/** How a cancelled guest's failure starts (the worker's message, completed here with the reason). */
const CANCELLED_PREFIX = "code mode exec was cancelled: ";
/** A staged answer's text to the bytes its VM parses (each result owns its buffer, so it can be transferred). */
const utf8 = new TextEncoder();

/** What a task uses of its pool. */
export type TaskPool = {
  readonly lanes: Lanes;
  readonly scheduler: FairScheduler;
  readonly budget: CpuBudget;
  readonly health: PoolHealthMonitor;
  readonly room: RoomHints;
  readonly vmStarts: Record<VmStart, number>;
  readonly log: Logger;
  /** The pool is shutting down: a task whose thread stopped is not run again. */
  readonly closed: boolean;
  /** A new attempt id, published by a worker while its VM holds the thread (./lanes.ts). */
  nextTaskId(): number;
  /** Terminates the worker thread a runaway guest holds. */
  terminate(threadId: number | undefined): void;
};

export class PoolTask {
  /** When the running attempt's VM got its thread: a killed one is charged from then. */
  private startedAt = 0;
  private readonly submittedAt = Date.now();
  private firstStartAt = 0;
  private attempts = 0;
  private resolveOutcome!: (o: TaskOutcome) => void;
  readonly outcome = new Promise<TaskOutcome>((r) => (this.resolveOutcome = r));
  private port: MessagePort | undefined;
  private finished = false;
  private cancelledReason: string | undefined;
  private readonly backlog: MainMessage[] = [];
  /** Calls the VM was told await a person's approval. */
  private readonly approvals = new Set<string>();
  private readonly cancelFlag = new SharedArrayBuffer(4);
  /** The VM's latest idle image on a shared thread, and answers sent to it since. */
  private parked: Parked | undefined;
  /** Answers that image may lack (./image-answers.ts). */
  private readonly imageAnswers = new ImageAnswers();
  /** Calls whose answer text went to the current attempt's port in a `stage` message. */
  private readonly stagedOnPort = new Set<string>();
  /** Times the task was withdrawn from a hogged lane before it started. */
  private moves = 0;
  /** Moves the running attempt off its lane if another guest holds it (set per attempt). */
  private nudge: (() => void) | undefined;
  /** Re-arms the running attempt's kill timer for a cancel (set per attempt). */
  private killAfter: ((ms: number) => void) | undefined;

  /**
   * `tenant` is the session charged the thread time its VM holds (./cpu-budget.ts);
   * `roomy`: it starts on a grown instance when one is idle (./room-hints.ts).
   */
  constructor(
    private readonly pool: TaskPool,
    private readonly submission: Submission,
    private readonly events: ExecEvents,
    private readonly tenant: string,
    private readonly roomy: boolean,
  ) {}

  /** Queues the task's first attempt; returns what answers, suspends or cancels it. */
  start(): ExecHandle {
    this.attempt(0);
    const send = (m: MainMessage) => {
      if (this.finished || !this.port) return;
      this.port.postMessage(m);
    };
    return {
      outcome: this.outcome,
      answer: (callId, result) => {
        const m = answerMessage(callId, result);
        // An image continued elsewhere is given the whole text; this port already has it.
        this.imageAnswers.sent(m);
        send(this.stagedOnPort.delete(callId) && m.ok ? { ...m, json: "", staged: true } : m);
        this.nudge?.();
      },
      stage: (callId, text) => {
        // A text with a lone surrogate has no UTF-8 form: it is answered unstaged.
        if (this.finished || !this.port || (typeof text === "string" && !text.isWellFormed())) return;
        // Bytes, not the string: a transferred buffer arrives at once where a 0.7 MB string
        // is cloned (0.04 against 0.8 ms), and QuickJS parses UTF-8 (../worker/host-json.ts).
        // The caller's bytes are copied: their buffer is not ours to transfer.
        const bytes = typeof text === "string" ? utf8.encode(text) : new Uint8Array(text);
        this.stagedOnPort.add(callId);
        this.port.postMessage({ t: "stage", callId, bytes } satisfies MainMessage, [bytes.buffer]);
        this.nudge?.();
      },
      unstage: (callId) => {
        if (this.stagedOnPort.delete(callId)) send({ t: "unstage", callId });
      },
      suspend: () => {
        send({ t: "suspend" });
        this.backlog.push({ t: "suspend" });
      },
      approval: (callId) => {
        this.approvals.add(callId);
        send({ t: "approval", callId });
      },
      cancel: (reason) => {
        if (this.cancelledReason !== undefined) return;
        this.cancelledReason = reason;
        // The flag reaches a computing guest at its next interrupt poll; the message
        // carries the reason; a native loop is killed after the grace.
        Atomics.store(new Int32Array(this.cancelFlag), 0, 1);
        send({ t: "cancel", reason });
        this.backlog.push({ t: "cancel", reason });
        this.killAfter?.(0);
      },
    };
  }

  private finish(o: TaskOutcome): void {
    if (this.finished) return;
    this.finished = true;
    this.port?.close();
    // A guest stopped through the shared flag knows it was cancelled, not why: say why.
    if (this.cancelledReason !== undefined && o.status === "failed" && o.error.startsWith(CANCELLED_PREFIX))
      o = { ...o, error: `${CANCELLED_PREFIX}${this.cancelledReason}` };
    const cpuMs = o.cpuMs ?? (this.startedAt > 0 ? Date.now() - this.startedAt : 0);
    this.pool.budget.ended(this.tenant, cpuMs);
    if (cpuMs >= LOOP_MS) this.pool.scheduler.noteHog(this.tenant);
    this.pool.scheduler.pump();
    this.resolveOutcome({
      ...o,
      queuedMs: this.firstStartAt > 0 ? this.firstStartAt - this.submittedAt : Date.now() - this.submittedAt,
      moves: this.attempts - 1,
    });
  }

  // A task waits in the fair queue (./scheduler.ts) until a lane has room; until then
  // it ends there if it was cancelled or its time (from this submission) ran out.
  private attempt(tries: number, unpark?: Unpark, leftLane?: Lane): void {
    const queuedUntil = Date.now() + this.submission.limits.timeoutMs + killGraceMs(this.submission.limits.timeoutMs);
    this.pool.scheduler.submit({
      tenant: this.tenant,
      // A run continued from its image, or a task taken back from a lane it joined, is placed spread.
      spread: leftLane !== undefined || unpark !== undefined,
      ...(leftLane ? { avoid: leftLane } : {}),
      run: (lane, packed) => this.attemptOn(lane, tries, unpark, packed),
      gone: () => {
        if (this.finished) return true;
        if (this.cancelledReason !== undefined)
          this.finish({
            status: "failed",
            error: `${CANCELLED_PREFIX}${this.cancelledReason}`,
            code: "internal_error",
            outputBytes: this.submission.outputBytesUsed,
          });
        else if (this.pool.health.refusal())
          this.finish({ status: "failed", error: this.pool.health.refusal()!, code: "runtime_unavailable", outputBytes: this.submission.outputBytesUsed });
        else if (Date.now() > queuedUntil)
          this.finish({
            status: "failed",
            error: "no sandbox worker became free in time.",
            code: "runtime_unavailable",
            outputBytes: this.submission.outputBytesUsed,
          });
        return this.finished;
      },
    });
  }

  private attemptOn(lane: Lane, tries: number, unpark: Unpark | undefined, packed: boolean): void {
    this.attempts++;
    const channel = new MessageChannel();
    this.port = channel.port1;
    this.stagedOnPort.clear();
    let threadId: number | undefined;
    let started = false;
    /** The task reported something the gateway sees: running it again would repeat it. */
    let emitted = false;
    // The attempt's claim: 0 posted, 1 started by the worker, 2 withdrawn by the pool
    // (its lane got hogged before it started; see ./lanes.ts).
    const taskId = this.pool.nextTaskId();
    lane.enter(this.tenant, taskId);
    let onLane = true;
    const leaveLane = () => {
      if (!onLane) return;
      onLane = false;
      lane.leave(this.tenant, taskId);
      // After this turn: the task's "done" (and its CPU charge) is usually handled by then.
      setImmediate(() => this.pool.scheduler.pump());
    };
    const claim = new Int32Array(new SharedArrayBuffer(4));
    // A continued run's image stays valid until its VM reports something new.
    const carried = this.imageAnswers.startAttempt(unpark !== undefined);
    if (unpark)
      this.parked = {
        t: "parked",
        parked: unpark.parked,
        pending: unpark.pending,
        outputBytes: unpark.outputBytesUsed,
        deadlineAtMs: unpark.deadlineAtMs,
        seq: 0,
        rx: 0,
      };
    /** Withdrawn before it started: another attempt runs the task; ignore this one. */
    let superseded = false;
    let killTimer: NodeJS.Timeout | undefined;
    // `reason`: what armed the timer, its deadline or a cancel (the gateway's, or a drain's),
    // logged with the grace when the kill comes: what an operator, and the tests, read it by.
    const armKill = (inMs: number, reason: "deadline" | "cancelled") => {
      clearTimeout(killTimer);
      const graceMs = killGraceMs(this.submission.limits.timeoutMs);
      killTimer = setTimeout(() => {
        if (this.finished || superseded) return;
        // Another guest holds the thread (this VM could not run to meet its deadline):
        // that one is killed by its own timer; this run is not to blame.
        const holder = lane.holder();
        if (holder !== 0 && holder !== taskId) return armKill(HOG_MS - graceMs, reason);
        this.pool.log.warn(
          { threadId, timeoutMs: this.submission.limits.timeoutMs, killReason: reason, graceMs },
          reason === "cancelled" ? "guest ignored its cancel; terminating its worker thread" : "guest ignored its deadline; terminating its worker thread",
        );
        this.finish({
          status: "failed",
          error: `code mode exec timed out after ${this.submission.limits.timeoutMs} ms (the sandbox stopped a loop that ignored interrupts).`,
          code: "timeout",
          outputBytes: this.submission.outputBytesUsed,
        });
        this.pool.terminate(threadId);
      }, inMs + graceMs);
      killTimer.unref();
    };
    const startTimer = setTimeout(() => {
      if (!started)
        this.finish({
          status: "failed",
          error: "no sandbox worker became free in time.",
          code: "runtime_unavailable",
          outputBytes: this.submission.outputBytesUsed,
        });
    }, this.submission.limits.timeoutMs + killGraceMs(this.submission.limits.timeoutMs));
    startTimer.unref();

    channel.port1.on("message", (m: WorkerMessage) => {
      if (superseded) return;
      try {
        if (!this.finished) forwardEvent(m, this.events);
      } catch (err) {
        this.pool.log.error({ err, message: m.t }, "handling a worker message failed; the exec is failed, the sidecar keeps serving");
        this.finish({
          status: "failed",
          error: "internal: the sidecar could not handle a request from the program.",
          code: "internal_error",
          outputBytes: this.submission.outputBytesUsed,
        });
        return;
      }
      switch (m.t) {
        case "output":
        case "call":
        case "request":
        case "yield":
          if (m.rx !== undefined) this.imageAnswers.received(m.rx);
          emitted = true;
          // The VM moved on since it parked: that image would repeat what the gateway saw.
          this.parked = undefined;
          break;
        case "parked":
          this.parked = m;
          this.imageAnswers.parked(m.rx);
          break;
        case "started":
          started = true;
          clearTimeout(leash);
          this.startedAt = Date.now();
          if (this.firstStartAt === 0) this.firstStartAt = this.startedAt;
          threadId = m.threadId;
          clearTimeout(startTimer);
          for (const b of this.backlog.splice(0)) channel.port1.postMessage(b);
          // A VM continued on another thread knows nothing of approvals yet: tell it again.
          for (const callId of this.approvals) channel.port1.postMessage({ t: "approval", callId } satisfies MainMessage);
          if (this.cancelledReason !== undefined) armKill(0, "cancelled");
          else armKill(this.submission.limits.timeoutMs, "deadline");
          this.killAfter = (ms) => armKill(ms, "cancelled");
          break;
        case "watch":
          // The worker moved its own deadline (the VM got the thread, or a snapshot is
          // being encoded): the kill follows it, with the same grace.
          // A cancel already asked for the kill: a watch sent before the worker saw it must not put it off.
          if (started) {
            if (this.cancelledReason !== undefined) armKill(0, "cancelled");
            else armKill(Math.max(0, m.untilMs - Date.now()), "deadline");
          }
          break;
        case "done":
          clearTimeout(killTimer);
          if (m.outcome.vmStart) this.pool.vmStarts[m.outcome.vmStart]++;
          if (m.outcome.grew) this.pool.room.grew(this.tenant);
          if (m.outcome.memory) lane.memory = m.outcome.memory;
          this.finish(m.outcome);
          break;
      }
    });

    // A versioned catalog travels shared, not copied (./shared-catalog.ts).
    const posted =
      this.submission.kind === "exec"
        ? { ...this.submission, catalog: shareCatalog(this.submission.catalog), ...(this.roomy ? { roomy: true } : {}) }
        : this.submission;
    const task = (
      unpark
        ? { ...unpark, answers: carried, port: channel.port2, cancelFlag: this.cancelFlag, claim: claim.buffer, taskId }
        : { ...posted, port: channel.port2, cancelFlag: this.cancelFlag, claim: claim.buffer, taskId }
    ) as Task;
    /** Ends this attempt before its VM ran, or while it is parked: another one takes the task. */
    const supersede = () => {
      clearInterval(watch);
      clearTimeout(leash);
      superseded = true;
      this.moves++;
      clearTimeout(startTimer);
      clearTimeout(killTimer);
      channel.port1.close();
    };
    // Its lane is hogged by another guest: a task that has not started runs on a free
    // lane instead; a VM idle with its current image parked continues there from it.
    // Checked every slice, and at once when an answer arrives for the VM.
    const moveIfHeld = () => {
      if (superseded) return;
      if (this.finished || this.moves >= MAX_MOVES) return clearInterval(watch);
      // The pool cannot run code (./pool-health.ts): a task no thread started is taken back, and fails in the fair queue.
      const stranded = this.pool.health.refusal() !== undefined && Atomics.load(claim, 0) === 0;
      if (!stranded && (!lane.hogged || lane.holder() === taskId)) return;
      const from = Atomics.load(claim, 0) === 0 ? 0 : this.parked && this.parked.seq > 0 ? parkedClaim(this.parked.seq) : -1;
      if (from < 0) return;
      // Nowhere to go: the pool adds a surge lane (./lanes.ts), and the next tick moves there.
      if (!stranded && !this.pool.lanes.anyFreeBesides(lane)) return this.pool.scheduler.surge();
      if (Atomics.compareExchange(claim, 0, from, from === 0 ? CLAIM_WITHDRAWN : CLAIM_MOVED) !== from) return;
      supersede();
      if (from === 0) {
        leaveLane();
        this.pool.log.info(
          { lane: lane.index, heldMs: lane.heldMs() },
          stranded ? "taking back a task no thread started: the pool cannot run code" : "moving a task that had not started off a lane another guest holds",
        );
        return this.attempt(tries, unpark);
      }
      // The old VM stays on its lane until it wakes and gives the run up.
      this.pool.log.info(
        { lane: lane.index, heldMs: lane.heldMs(), pending: this.parked!.pending.length },
        "moving an idle run off a lane another guest holds, from its parked image",
      );
      this.attempt(tries, unparkTask(this.submission, this.parked!));
    };
    const watch = setInterval(moveIfHeld, HOG_MS);
    watch.unref();
    // It joined a busy lane (./scheduler.ts): not started within the leash, it is placed spread.
    const leash = packed
      ? setTimeout(() => {
          if (superseded || this.finished || this.moves >= MAX_MOVES || !this.pool.lanes.anyFreeBesides(lane)) return;
          if (Atomics.compareExchange(claim, 0, 0, CLAIM_WITHDRAWN) !== 0) return;
          supersede();
          leaveLane();
          this.pool.log.debug({ lane: lane.index }, "placing a task that joined a busy lane on another one: it had not started within its leash");
          this.attempt(tries, unpark, lane);
        }, PACK_LEASH_MS)
      : undefined;
    leash?.unref();
    this.nudge = moveIfHeld;
    lane.piscina.run(task, { transferList: [channel.port2] }).then(
      () => leaveLane(),
      (err: unknown) => {
        leaveLane();
        clearInterval(watch);
        if (superseded) return;
        // This attempt is over: nothing may move it any more.
        superseded = true;
        if (this.nudge === moveIfHeld) this.nudge = undefined;
        clearTimeout(startTimer);
        clearTimeout(killTimer);
        if (this.finished) return;
        if (!emitted && !unpark && !this.pool.closed && tries < 3) {
          // The thread died (another run's loop) before this task reported anything: run it elsewhere.
          this.pool.log.info({ tries, started }, "resubmitting a task whose worker was replaced before it reported anything");
          channel.port1.close();
          this.attempt(tries + 1);
          return;
        }
        if (this.parked && !this.pool.closed && tries < 3) {
          // The thread died for a neighbour while this VM was idle: continue it elsewhere
          // from the image it parked, with the answers sent since.
          this.pool.log.info({ tries, pending: this.parked.pending.length }, "continuing a run whose worker was killed for another run, from its parked image");
          channel.port1.close();
          this.attempt(tries + 1, unparkTask(this.submission, this.parked));
          return;
        }
        const reason = this.pool.closed ? "the sandbox is shutting down" : ((err as Error)?.message ?? String(err));
        this.finish({
          status: "failed",
          error: `the QuickJS worker running this exec stopped: ${reason}`,
          code: "runtime_unavailable",
          outputBytes: this.submission.outputBytesUsed,
        });
      },
    );
  }
}

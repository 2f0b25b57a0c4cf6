/**
 * The sidecar's pool of QuickJS workers (one piscina per thread, ./lanes.ts), and the
 * host's own wall-clock kill.
 *
 * Each exec is a task with its own MessagePort (output, tool calls and the outcome
 * stream over it, in order). A worker hosts several tasks at once, because a VM that
 * awaits tool results does not use its thread. A native loop that ignores QuickJS's
 * interrupt handler blocks its thread, so the host watches every started task: past
 * its deadline plus a grace period the worker thread is terminated (only the guest that
 * holds the thread is blamed), piscina starts a replacement, and the runaway run fails
 * with `timeout`. No other run on that thread is lost: a task that had not reported
 * anything to its gateway is submitted again from the start, and a VM that had is
 * continued elsewhere from the image it parked while idle (./worker/occupancy.ts), with
 * the answers that image lacks (./image-answers.ts); nothing the gateway saw happens twice.
 * A light task that joined a busy lane (./scheduler.ts) and has not started within its
 * leash is placed on the least loaded lane instead.
 * While a guest holds a thread past a slice, the others there do not wait for it: a task
 * not yet started, or a VM idle with its current image parked, moves to a free lane
 * (a surge lane if there is none), and the run goes on there.
 */
import { MessageChannel, type MessagePort } from "node:worker_threads";
import { HOG_MS, poolLanes, type Lanes, type Lane } from "./lanes.js";
import { forwardEvent, killGraceMs, unparkTask, type ExecEvents, type ExecHandle, type Parked, type Submission, type Unpark } from "./pool-contract.js";
import { ImageAnswers } from "./image-answers.js";
import { RoomHints } from "./room-hints.js";
import { logLaneAdded, RecentCatalogs } from "./lane-warmup.js";
import { PoolHealthMonitor } from "./pool-health.js";
import { FairScheduler, LOOP_MS, PACK_LEASH_MS } from "./scheduler.js";
import { CpuBudget, INTERNAL_TENANT, WINDOW_MS } from "./cpu-budget.js";
import type { Logger } from "../shared/logger.js";
import { shareCatalog } from "./shared-catalog.js";
import { CLAIM_MOVED, CLAIM_WITHDRAWN, parkedClaim, type MainMessage, type Task, type TaskOutcome, type VmStart, type WorkerMemory, type WorkerMessage } from "./task-protocol.js";

export type PoolOptions = {
  threads?: number;
  /** Execs one worker hosts at once (VMs awaiting tools do not use the thread). */
  execsPerWorker?: number;
  log: Logger;
};

/** How often one task may be moved off hogged lanes before it just waits where it is. */
const MAX_MOVES = 8;
/** How a cancelled guest's failure starts (the worker's message, completed here with the reason). */
const CANCELLED_PREFIX = "code mode exec was cancelled: ";

export class SandboxPool {
  private readonly lanes: Lanes;
  private readonly budget: CpuBudget;
  private readonly scheduler: FairScheduler;
  /** Catalogs of the latest execs: a new thread prepares their images before it takes work. */
  private readonly recent = new RecentCatalogs();
  /** Sessions whose execs start on a grown instance (./room-hints.ts). */
  private readonly room = new RoomHints();
  /** Ids of attempts, which a worker publishes while its VM holds the thread (./lanes.ts). */
  private nextTaskId = 0;
  private readonly log: Logger;
  private closed = false;
  /** Can the pool still run code (its threads (re)start and run the warm-up probe: ./pool-health.ts)? */
  readonly health: PoolHealthMonitor;
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
    lanes.onAdd = logLaneAdded(lanes, log);
    this.health = new PoolHealthMonitor(lanes, this.recent, log);
    lanes.onWarmed = () => this.scheduler.pump();
    this.threads = threads;
    this.slots = slots;
    this.maxQueue = slots * 2;
    this.log = log;
  }

  static async create(options: PoolOptions): Promise<SandboxPool> {
    const { lanes, threads, execsPerWorker } = await poolLanes(options);
    return new SandboxPool(lanes, threads, threads * execsPerWorker, options.log);
  }

  get utilization(): number {
    return this.lanes.utilization;
  }

  /** Surge and background threads running now, beyond `threads` (./lanes.ts). */
  get extraThreads(): { surge: number; background: number } {
    return { surge: this.lanes.surges, background: this.lanes.backgrounds };
  }

  /** The worker threads' memory (metrics; ./worker/memory-report.ts). */
  get workerMemory(): WorkerMemory {
    return this.lanes.memory();
  }

  /** Tasks waiting for a free slot on a worker (metrics); `load` adds those running (a warm-up waits for none). */
  get queueSize(): number {
    return this.lanes.queueSize + this.scheduler.size;
  }
  get load(): number {
    return this.lanes.running + this.queueSize;
  }

  /** Why a new exec of `tenant` (a session, ./cpu-budget.ts) is refused now, or undefined (./scheduler.ts `refusal`, then the CPU share). */
  refusal(tenant: string): string | undefined {
    return this.scheduler.refusal(tenant, this.lanes.queueSize, this.threads, this.maxQueue) ?? this.budget.refusal(tenant);
  }

  /** Runs a task; `tenant` (the session, see ./cpu-budget.ts; none for the sidecar's own probes) is charged the thread time its VM held. */
  exec(submission: Submission, events: ExecEvents, tenant = INTERNAL_TENANT): ExecHandle {
    this.budget.started(tenant);
    if (submission.kind === "exec") this.recent.note(submission.catalog, submission.surface);
    const roomy = submission.kind === "exec" && this.room.take(tenant);
    /** When the running attempt's VM got its thread: a killed one is charged from then. */
    let startedAt = 0;
    const submittedAt = Date.now();
    let firstStartAt = 0;
    let attempts = 0;
    let resolveOutcome!: (o: TaskOutcome) => void;
    const outcome = new Promise<TaskOutcome>((r) => (resolveOutcome = r));
    let port: MessagePort | undefined;
    let finished = false;
    let cancelledReason: string | undefined;
    const backlog: MainMessage[] = [];
    const cancelFlag = new SharedArrayBuffer(4);
    /** The VM's latest idle image on a shared thread, and answers sent to it since. */
    let parked: Parked | undefined;
    /** Answers that image may lack (./image-answers.ts). */
    const imageAnswers = new ImageAnswers();
    /** Times the task was withdrawn from a hogged lane before it started. */
    let moves = 0;
    /** Moves the running attempt off its lane if another guest holds it (set per attempt). */
    let nudge: (() => void) | undefined;
    /** Re-arms the running attempt's kill timer (set per attempt). */
    let killAfter: ((ms: number) => void) | undefined;
    const finish = (o: TaskOutcome) => {
      if (finished) return;
      finished = true;
      port?.close();
      // A guest stopped through the shared flag knows it was cancelled, not why: say why.
      if (cancelledReason !== undefined && o.status === "failed" && o.error.startsWith(CANCELLED_PREFIX)) o = { ...o, error: `${CANCELLED_PREFIX}${cancelledReason}` };
      const cpuMs = o.cpuMs ?? (startedAt > 0 ? Date.now() - startedAt : 0);
      this.budget.ended(tenant, cpuMs);
      if (cpuMs >= LOOP_MS) this.scheduler.noteHog(tenant);
      this.scheduler.pump();
      resolveOutcome({ ...o, queuedMs: firstStartAt > 0 ? firstStartAt - submittedAt : Date.now() - submittedAt, moves: attempts - 1 });
    };

    // A task waits in the fair queue (./scheduler.ts) until a lane has room; until then
    // it ends there if it was cancelled or its time (from this submission) ran out.
    const attempt = (tries: number, unpark?: Unpark, leftLane?: Lane) => {
      const queuedUntil = Date.now() + submission.limits.timeoutMs + killGraceMs(submission.limits.timeoutMs);
      this.scheduler.submit({
        tenant,
        // A run continued from its image, or a task taken back from a lane it joined, is placed spread.
        spread: leftLane !== undefined || unpark !== undefined,
        ...(leftLane ? { avoid: leftLane } : {}),
        run: (lane, packed) => attemptOn(lane, tries, unpark, packed),
        gone: () => {
          if (finished) return true;
          if (cancelledReason !== undefined) finish({ status: "failed", error: `${CANCELLED_PREFIX}${cancelledReason}`, code: "internal_error", outputBytes: submission.outputBytesUsed });
          else if (this.health.refusal()) finish({ status: "failed", error: this.health.refusal()!, code: "runtime_unavailable", outputBytes: submission.outputBytesUsed });
          else if (Date.now() > queuedUntil) finish({ status: "failed", error: "no sandbox worker became free in time.", code: "runtime_unavailable", outputBytes: submission.outputBytesUsed });
          return finished;
        },
      });
    };
    const attemptOn = (lane: Lane, tries: number, unpark: Unpark | undefined, packed: boolean) => {
      attempts++;
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
      // A continued run's image stays valid until its VM reports something new.
      const carried = imageAnswers.startAttempt(unpark !== undefined);
      if (unpark) parked = { t: "parked", parked: unpark.parked, pending: unpark.pending, outputBytes: unpark.outputBytesUsed, deadlineAtMs: unpark.deadlineAtMs, seq: 0, rx: 0 };
      /** Withdrawn before it started: another attempt runs the task; ignore this one. */
      let superseded = false;
      let killTimer: NodeJS.Timeout | undefined;
      const armKill = (inMs: number) => {
        clearTimeout(killTimer);
        killTimer = setTimeout(() => {
          if (finished || superseded) return;
          // Another guest holds the thread (this VM could not run to meet its deadline):
          // that one is killed by its own timer; this run is not to blame.
          const holder = lane.holder();
          if (holder !== 0 && holder !== taskId) return armKill(HOG_MS - killGraceMs(submission.limits.timeoutMs));
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
          if (!finished) forwardEvent(m, events);
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
            if (m.rx !== undefined) imageAnswers.received(m.rx);
            emitted = true;
            // The VM moved on since it parked: that image would repeat what the gateway saw.
            parked = undefined;
            break;
          case "parked":
            parked = m;
            imageAnswers.parked(m.rx);
            break;
          case "started":
            started = true;
            clearTimeout(leash);
            startedAt = Date.now();
            if (firstStartAt === 0) firstStartAt = startedAt;
            threadId = m.threadId;
            clearTimeout(startTimer);
            for (const b of backlog.splice(0)) channel.port1.postMessage(b);
            armKill(cancelledReason !== undefined ? 0 : submission.limits.timeoutMs);
            killAfter = armKill;
            break;
          case "watch":
            // The worker moved its own deadline (the VM got the thread, or a snapshot is
            // being encoded): the kill follows it, with the same grace.
            // A cancel already asked for the kill: a watch sent before the worker saw it must not put it off.
            if (started) armKill(cancelledReason !== undefined ? 0 : Math.max(0, m.untilMs - Date.now()));
            break;
          case "done":
            clearTimeout(killTimer);
            if (m.outcome.vmStart) this.vmStarts[m.outcome.vmStart]++;
            if (m.outcome.grew) this.room.grew(tenant);
            if (m.outcome.memory) lane.memory = m.outcome.memory;
            finish(m.outcome);
            break;
        }
      });

      // A versioned catalog travels shared, not copied (./shared-catalog.ts).
      const posted = submission.kind === "exec" ? { ...submission, catalog: shareCatalog(submission.catalog), ...(roomy ? { roomy } : {}) } : submission;
      const task = (unpark ? { ...unpark, answers: carried, port: channel.port2, cancelFlag, claim: claim.buffer, taskId } : { ...posted, port: channel.port2, cancelFlag, claim: claim.buffer, taskId }) as Task;
      /** Ends this attempt before its VM ran, or while it is parked: another one takes the task. */
      const supersede = () => {
        clearInterval(watch);
        clearTimeout(leash);
        superseded = true;
        moves++;
        clearTimeout(startTimer);
        clearTimeout(killTimer);
        channel.port1.close();
      };
      // Its lane is hogged by another guest: a task that has not started runs on a free
      // lane instead; a VM idle with its current image parked continues there from it.
      // Checked every slice, and at once when an answer arrives for the VM.
      const moveIfHeld = () => {
        if (superseded) return;
        if (finished || moves >= MAX_MOVES) return clearInterval(watch);
        // The pool cannot run code (./pool-health.ts): a task no thread started is taken back, and fails in the fair queue.
        const stranded = this.health.refusal() !== undefined && Atomics.load(claim, 0) === 0;
        if (!stranded && (!lane.hogged || lane.holder() === taskId)) return;
        const from = Atomics.load(claim, 0) === 0 ? 0 : parked && parked.seq > 0 ? parkedClaim(parked.seq) : -1;
        if (from < 0) return;
        // Nowhere to go: the pool adds a surge lane (./lanes.ts), and the next tick moves there.
        if (!stranded && !this.lanes.anyFreeBesides(lane)) return this.scheduler.surge();
        if (Atomics.compareExchange(claim, 0, from, from === 0 ? CLAIM_WITHDRAWN : CLAIM_MOVED) !== from) return;
        supersede();
        if (from === 0) {
          leaveLane();
          this.log.info({ lane: lane.index, heldMs: lane.heldMs() }, stranded ? "taking back a task no thread started: the pool cannot run code" : "moving a task that had not started off a lane another guest holds");
          return attempt(tries, unpark);
        }
        // The old VM stays on its lane until it wakes and gives the run up.
        this.log.info({ lane: lane.index, heldMs: lane.heldMs(), pending: parked!.pending.length }, "moving an idle run off a lane another guest holds, from its parked image");
        attempt(tries, unparkTask(submission, parked!));
      };
      const watch = setInterval(moveIfHeld, HOG_MS);
      watch.unref();
      // It joined a busy lane (./scheduler.ts): not started within the leash, it is placed spread.
      const leash = packed
        ? setTimeout(() => {
            if (superseded || finished || moves >= MAX_MOVES || !this.lanes.anyFreeBesides(lane)) return;
            if (Atomics.compareExchange(claim, 0, 0, CLAIM_WITHDRAWN) !== 0) return;
            supersede();
            leaveLane();
            this.log.debug({ lane: lane.index }, "placing a task that joined a busy lane on another one: it had not started within its leash");
            attempt(tries, unpark, lane);
          }, PACK_LEASH_MS)
        : undefined;
      leash?.unref();
      nudge = moveIfHeld;
      lane.piscina.run(task, { transferList: [channel.port2] }).then(
        () => leaveLane(),
        (err: unknown) => {
          leaveLane();
          clearInterval(watch);
          if (superseded) return;
          // This attempt is over: nothing may move it any more.
          superseded = true;
          if (nudge === moveIfHeld) nudge = undefined;
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
            this.log.info({ tries, pending: parked.pending.length }, "continuing a run whose worker was killed for another run, from its parked image");
            channel.port1.close();
            attempt(tries + 1, unparkTask(submission, parked));
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
        imageAnswers.sent(m);
        send(m);
        nudge?.();
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

  private terminateThread(threadId: number | undefined): void {
    this.lanes.terminate(threadId);
  }

  async close(): Promise<void> {
    this.closed = true;
    this.health.close();
    await this.lanes.destroy();
  }
}

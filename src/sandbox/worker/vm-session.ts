/**
 * One segment of a code-mode run in one QuickJS VM (reset to a prepared image for `exec`,
 * holding a suspended run's state for `wait`; starts: ./sessions.ts). Both end in one drain
 * loop: every host answer that arrives before the deadline goes into the live VM, so the
 * program continues within the same call. It ends in a TaskOutcome and never throws; done when
 * the value settled and nothing is pending.
 *
 * It suspends instead of failing when the deadline passes with host calls pending, or when the
 * guest yields with nothing else ready: the idle VM is snapshotted and handed back with what it
 * awaits; callbacks have stable names and the guest keeps its promises by call id, so a restore
 * needs only those re-registered and the answers delivered. A VM sharing its thread parks a
 * copy when idle (./occupancy.ts). Enforced here: deadline and cancel (the interrupt handler
 * and shared cancel flag of ./run-stop.ts), output bytes, pending calls, armed timers, memory,
 * stack; a loop that ignores interrupts is killed by the main thread (../pool/pool-task.ts).
 */
import { type QuickJS, JSException, type JSValueHandle } from "quickjs-wasi";
import type { MessagePort } from "node:worker_threads";
import { randomText, randomWords } from "../../shared/ids.js";
import type {
  CancelFlag,
  ErrorCodeName,
  MainMessage,
  PendingKind,
  PendingRef,
  SuspendReason,
  TaskLimits,
  TaskOutcome,
  WorkerMessage,
} from "../pool/task-protocol.js";
import { parseBridgeJson } from "./json-bridge.js";
import { defineHostErrors, guestError, plainForGuest } from "./guest-errors.js";
import { baseImage } from "./base-image.js";
import { encodeSnapshot, SnapshotTooLarge } from "./snapshot-codec.js";
import { liveState } from "./instance-reset.js";
import { cohosted, enter, leave, parkedImage, publishParked, stillOwned } from "./occupancy.js";
import { ThreadHold } from "./busy.js";
import { RunStop } from "./run-stop.js";
import { HOLD_FRACTION, StagedAnswers } from "./staged-answers.js";
import { MAX_TIMER_MS, MAX_TIMERS, TimerTable } from "./timers.js";
import { setGuestClock, type ClockSource } from "./guest-clock.js";
import { mainMessageOf, TapeRecorder, type Tape, type TapePlayer } from "./replay-tape.js";
import { boundedError, completion, failed, OUTPUT_ITEM_OVERHEAD_BYTES, SNAPSHOT_BUDGET_MS, suspendedOutcome, thrownOutcome, type Settled } from "./outcomes.js";
import { checkpointable, IdleCheckpoint } from "./idle-checkpoint.js";

export { failed, OUTPUT_ITEM_OVERHEAD_BYTES, SNAPSHOT_BUDGET_MS };

// The errors hostSync and hostAsync throw reach the guest with defined properties only.
defineHostErrors();

/**
 * How long an idle VM whose every awaited call waits for a person stays live before it
 * suspends with reason `approval`: a gateway that decides at once (right behind its
 * approval-pending answer) reaches the live VM instead of a snapshot in the making.
 */
const APPROVAL_GRACE_MS = 50;

/** The state of one segment: host callbacks, what the guest awaits, and the drain loop. */
export class GuestSession {
  vm: QuickJS | undefined;
  /** When the session must stop, and the interrupt handler QuickJS polls (./run-stop.ts). */
  private readonly stop = new RunStop();
  readonly interrupt = this.stop.interrupt;
  outputBytes: number;
  private settled: Settled | undefined;
  private readonly pending = new Map<string, PendingKind>();
  /** Armed timers: call id → when it is due (epoch ms). Each is also in `pending`. */
  private readonly timers = new TimerTable();
  private readonly inbox: MainMessage[] = [];
  /** Hands answers to the VM, large ones parsed ahead of their verdict (./staged-answers.ts). */
  private readonly answers: StagedAnswers;
  /** The prelude's delivery function, and its snapshot-portable token. */
  deliverFn: JSValueHandle | undefined;
  guestToken = 0;
  private wake: (() => void) | undefined;
  /** The sidecar drains: suspend at the next idle moment instead of waiting on. */
  private suspendRequested = false;
  /** Calls the gateway said await a person's approval (the host forgets the ids once answered). */
  private readonly approvalCalls = new Set<string>();
  /** Since when every call the idle VM awaits waits for a person (undefined: not so now). */
  private approvalsOnlySince: number | undefined;
  /** Answers received on the port so far (stamped on what the VM sends, ../pool/task-protocol.ts). */
  private received = 0;
  private readonly onMessage = (m: MainMessage) => {
    if (m.t === "cancel") this.stop.cancelled = m.reason;
    else if (m.t === "suspend") this.suspendRequested = true;
    else if (m.t === "approval") this.approvalCalls.add(m.callId);
    else if (m.t === "stage" || m.t === "unstage") this.inbox.push(m);
    else {
      this.inbox.push(m);
      this.received++;
    }
    this.wake?.();
  };

  constructor(
    private readonly port: MessagePort,
    readonly limits: TaskLimits,
    outputBytesUsed: number,
    private readonly bootJson: string,
  ) {
    this.outputBytes = outputBytesUsed;
    this.answers = new StagedAnswers(Math.floor(limits.memoryLimitBytes / HOLD_FRACTION));
    if (limits.checkpointAfterMs) this.checkpoints = new IdleCheckpoint(limits.checkpointAfterMs);
    port.on("message", this.onMessage);
    // The pool closes its end when it moved the run elsewhere: wake to give it up.
    port.once("close", () => this.wake?.());
  }

  /** ALL_TOOLS as JSON, handed over when the program first reads it. */
  allToolsJson = "[]";
  convenienceJson = "[]";
  /** The program's JavaScript (an exec only), to place errors QuickJS gives no position. */
  source = "";
  /** The surface never suspends (tool_search_code): no snapshot is taken at the deadline. */
  neverSuspends = false;
  /** Takes the instance back for a reset (./warm-vms.ts) instead of disposing it. */
  recycle: ((vm: QuickJS, healthy: boolean) => void) | undefined;
  /** False once the instance trapped or the run failed in the host. */
  private healthy = true;
  /** Checkpoints of the idle VM, when the task takes them (./idle-checkpoint.ts). */
  private readonly checkpoints: IdleCheckpoint | undefined;
  /** Who owns the run (../pool/task-protocol.ts, `claim`); images parked so far. */
  private claim: Int32Array | undefined;
  private parkSeq = 0;

  /** What the VM's engine reads as now: the host's clock, recorded or replayed (./guest-clock.ts). */
  private clock: ClockSource = Date.now;
  /** Set when the segment is recorded for replay (./replay-tape.ts). */
  private recorder: TapeRecorder | undefined;
  /** Set when the segment is a replay: the tape says what the host answers, and when. */
  player: TapePlayer | undefined;

  /** Records what the VM consumes, or (with a tape) replays a recorded segment. */
  useTape(player?: TapePlayer): void {
    if (player) {
      this.player = player;
      this.stop.script = player;
      this.clock = player.clock;
    } else {
      this.recorder = new TapeRecorder();
      this.stop.tape = this.recorder;
      this.clock = this.recorder.clock;
    }
  }

  /** The recording cannot go on exactly from here (the replay stops at this point). */
  cutTape(why: string): void {
    this.recorder?.cut(why);
  }

  /** The recorded tape, for the outcome. */
  get tape(): Tape | undefined {
    return this.recorder?.tape;
  }

  /** The segment's VM takes the worker thread: its clock is the one the engine reads. */
  private takeThread(): void {
    this.held.take();
    setGuestClock(this.clock);
  }

  private releaseThread(): void {
    setGuestClock(undefined);
    this.held.release();
  }

  /** Takes the pool's shared words and id for the task. */
  bind(task: CancelFlag): void {
    if (task.cancelFlag) this.stop.cancelFlag = new Int32Array(task.cancelFlag);
    if (task.claim) this.claim = new Int32Array(task.claim);
    if (task.taskId) this.held.taskId = task.taskId;
  }
  private post(m: WorkerMessage): void {
    this.recorder?.sent(m);
    this.player?.sent(m);
    this.port.postMessage(m);
  }

  fail(error: string, code?: ErrorCodeName): TaskOutcome {
    return failed(error, this.outputBytes, code);
  }

  /** Starts the VM's deadline (or continues one set elsewhere), and moves the host's kill timer with it. */
  startDeadline(atMs?: number): void {
    // A replay has no deadline of its own: it stops where its record did.
    if (this.player) return;
    this.stop.deadline = atMs ?? Date.now() + this.limits.timeoutMs;
    this.post({ t: "watch", untilMs: this.stop.deadline });
  }

  /** True while the session waits for host answers (its VM is not on the stack). */
  private idle = false;
  /** Something ran in the VM since it last parked. */
  private dirty = true;

  /**
   * Parks a copy of the idle VM on the main thread, so that if this thread is killed for
   * a neighbour's runaway loop, the pool continues this run elsewhere. Only on a shared
   * thread (a lone VM has no neighbour to die for), and only when something changed.
   */
  parkIfIdle(): void {
    if (!this.idle || !this.dirty || !this.vm || this.deliverFn === undefined || this.settled?.ok === false) return;
    const { parked, transfer } = parkedImage(this.vm, this.guestToken);
    const seq = ++this.parkSeq;
    this.port.postMessage(
      {
        t: "parked",
        parked,
        pending: this.pendingRefs(),
        outputBytes: this.outputBytes,
        deadlineAtMs: this.stop.deadline,
        seq,
        rx: this.received,
      } satisfies WorkerMessage,
      transfer,
    );
    publishParked(this.claim, seq);
    this.dirty = false;
  }

  /** What the VM awaits, as a suspension or a parked image records it. */
  private pendingRefs(): PendingRef[] {
    return [...this.pending].map(([callId, kind]) => (kind === "timer" ? { callId, kind, dueAtMs: this.timers.get(callId) ?? Date.now() } : { callId, kind }));
  }

  /** Posts a checkpoint of the idle VM, which then waits on (./idle-checkpoint.ts). */
  private async checkpoint(wasm: WebAssembly.Module): Promise<void> {
    setGuestClock(undefined);
    const { deadline } = this.stop;
    await this.checkpoints!.take({
      vm: this.vm!,
      guestToken: this.guestToken,
      wasm,
      ...this.limits,
      deadline,
      pending: this.pendingRefs(),
      outputBytes: this.outputBytes,
      port: this.port,
    });
    setGuestClock(this.clock);
  }

  awaitAgain(callId: string, kind: PendingKind, dueAtMs?: number): void {
    this.pending.set(callId, kind);
    if (kind === "timer") this.timers.set(callId, dueAtMs ?? Date.now());
  }

  /** After a restore: what the program settled to before the snapshot ("1"/"0" + JSON, or ""), from the prelude. */
  restoreSettlement(settlement: string): void {
    if (settlement.startsWith("1")) this.settled = { ok: true, valueJson: settlement.slice(1) };
    else if (settlement.startsWith("0")) this.settled = { ok: false, errorJson: settlement.slice(1) };
  }

  enqueue(m: MainMessage): void {
    this.inbox.push(m);
  }

  private record(kind: "text" | "json", data: string): void {
    const bytes = Buffer.byteLength(data, "utf8") + OUTPUT_ITEM_OVERHEAD_BYTES;
    if (this.outputBytes + bytes > this.limits.maxOutputBytes) {
      this.stop.fatal = { code: "output_limit_exceeded", message: `code mode output exceeded maxOutputBytes (${this.limits.maxOutputBytes} bytes).` };
      throw guestError("RangeError", this.stop.fatal.message);
    }
    this.outputBytes += bytes;
    this.post({ t: "output", kind, data, rx: this.received });
  }

  readonly hostSync = (opH?: JSValueHandle, argH?: JSValueHandle): JSValueHandle => {
    const vm = this.vm!;
    try {
      const op = opH?.isString ? opH.toString() : "";
      const arg = argH?.isString ? argH.toString() : "";
      switch (op) {
        case "boot":
          return vm.newString(this.bootJson);
        case "all_tools":
          this.recorder?.read("all_tools");
          return vm.newString(this.allToolsJson);
        case "convenience":
          this.recorder?.read("convenience");
          return vm.newString(this.convenienceJson);
        case "seed": {
          // Math.random's seed for this run (../guest/prelude-random.ts): 128 bits of crypto randomness.
          if (this.player) return vm.newString(this.player.seed());
          const seed = JSON.stringify(randomWords());
          this.recorder?.seed(seed);
          return vm.newString(seed);
        }
        case "text":
          this.record("text", arg);
          return vm.undefined;
        case "json":
          parseBridgeJson(arg, "json() value");
          this.record("json", arg);
          return vm.undefined;
        case "result":
          if (!this.settled) this.settled = { ok: true, valueJson: arg };
          return vm.undefined;
        case "error":
          if (!this.settled) this.settled = { ok: false, errorJson: arg };
          return vm.undefined;
        case "memory_limit":
          // The MCP-run prelude saw QuickJS refuse an allocation (its catchable "out of memory"):
          // the run ends at the next interrupt check or job boundary, whatever the script catches.
          this.stop.fatal ??= { code: undefined, message: `InternalError: out of memory${/^\(line \d+, column \d+\)$/.test(arg) ? ` ${arg}` : ""}` };
          return vm.undefined;
        case "uncaught":
          // A timer callback or microtask threw: the run fails, even after its value settled.
          if (!this.settled || this.settled.ok) this.settled = { ok: false, errorJson: arg };
          return vm.undefined;
        case "timer_clear":
          if (this.pending.get(arg) === "timer") {
            this.pending.delete(arg);
            this.timers.delete(arg);
          }
          return vm.undefined;
        default:
          throw guestError("TypeError", "unknown host operation");
      }
    } catch (err) {
      throw plainForGuest(err);
    }
  };

  readonly hostAsync = (opH?: JSValueHandle, argH?: JSValueHandle): JSValueHandle => {
    const vm = this.vm!;
    try {
      const op = opH?.isString ? opH.toString() : "";
      const payloadJson = argH?.isString ? argH.toString() : "null";
      const callId = this.player ? this.player.id() : `c_${randomText(9)}`;
      this.recorder?.id(callId);
      const payload = parseBridgeJson(payloadJson, "tool input") as Record<string, unknown> | null;
      if (op === "timer") {
        if (this.timers.size >= MAX_TIMERS) throw guestError("RangeError", `too many timers (at most ${MAX_TIMERS} may be armed at once).`);
        const ms = typeof payload?.ms === "number" && payload.ms > 0 ? Math.min(payload.ms, MAX_TIMER_MS) : 0;
        this.pending.set(callId, "timer");
        this.timers.set(callId, Date.now() + ms);
        return vm.newString(callId);
      }
      if (this.pending.size - this.timers.size >= this.limits.maxPendingToolCalls) {
        throw guestError("RangeError", `too many pending tool calls (maxPendingToolCalls is ${this.limits.maxPendingToolCalls}).`);
      }
      if (op === "call" || op === "mcp") {
        this.pending.set(callId, "call");
        this.post({
          t: "call",
          callId,
          via: op === "call" ? "tools" : "mcp",
          target: String(payload?.id ?? ""),
          path: "",
          inputJson: JSON.stringify(payload?.input ?? {}),
          rx: this.received,
        });
      } else if (op === "ns") {
        this.pending.set(callId, "call");
        const args = payload?.args;
        this.post({
          t: "call",
          callId,
          via: "ns",
          target: String(payload?.ns ?? ""),
          path: String(payload?.path ?? ""),
          inputJson: JSON.stringify(Array.isArray(args) ? args : []),
          rx: this.received,
        });
      } else if (op === "search" || op === "describe" || op === "api_list" || op === "api_read" || op === "mcp_api" || op === "store" || op === "load") {
        this.pending.set(callId, "request");
        this.post({ t: "request", reqId: callId, op, payloadJson, rx: this.received });
      } else if (op === "yield") {
        this.pending.set(callId, "yield");
        this.post({ t: "yield", callId, reason: String(payload?.reason ?? ""), rx: this.received });
      } else {
        throw guestError("TypeError", "unknown host operation");
      }
      return vm.newString(callId);
    } catch (err) {
      throw plainForGuest(err);
    }
  };

  /** Moves timers that are due into the inbox, earliest first. */
  private fireDueTimers(): void {
    // A replay's timers fire where its record says, with the answers around them.
    if (this.player) return;
    for (const callId of this.timers.takeDue(Date.now())) this.inbox.push({ t: "answer", callId, ok: true, json: "" });
  }

  private outcomeFor(err: unknown): TaskOutcome {
    if (this.stop.fatal) return this.fail(this.stop.fatal.message, this.stop.fatal.code);
    const cancelled = this.stop.cancelReason();
    if (cancelled !== undefined) return this.fail(`code mode exec was cancelled: ${cancelled}`, "internal_error");
    if (Date.now() > this.stop.deadline) return this.fail(`code mode exec timed out after ${this.limits.timeoutMs} ms.`, "timeout");
    return thrownOutcome(err, this.outputBytes);
  }

  private hasPendingYield = (): boolean => [...this.pending.values()].includes("yield");

  /**
   * True when every call the VM awaits waits for a person's approval and nothing else can
   * wake it before the deadline (no request, no yield, no timer due by then): waiting on
   * would only spend the run's time, so it suspends with reason `approval` at once.
   */
  private onlyApprovalsLeft(): boolean {
    if (this.neverSuspends || this.approvalCalls.size === 0) return false;
    let asking = false;
    for (const [id, kind] of this.pending) {
      if (kind === "call" && this.approvalCalls.has(id)) asking = true;
      else if (kind !== "timer" || (this.timers.get(id) ?? 0) <= this.stop.deadline) return false;
    }
    return asking;
  }

  /** Why an idle VM suspends at its deadline or for a drain. */
  private idleReason(): SuspendReason {
    return this.onlyApprovalsLeft() ? "approval" : "pending_tools";
  }

  /** Snapshots the idle VM for a `wait` to continue later. */
  private async suspend(reason: SuspendReason, wasm: WebAssembly.Module): Promise<TaskOutcome> {
    const t0 = performance.now();
    const pendingRefs = this.pendingRefs();
    this.recorder?.suspended(reason);
    if (this.neverSuspends) {
      // A surface that never suspends (tool_search_code) only needs to know what was pending.
      return {
        status: "suspended",
        reason,
        envelope: new Uint8Array(0),
        pending: pendingRefs,
        outputBytes: this.outputBytes,
        snapshot: { encoding: "plain", memoryBytes: 0, changedPages: 0, encodeMs: 0 },
      };
    }
    this.post({ t: "watch", untilMs: Date.now() + SNAPSHOT_BUDGET_MS });
    this.stop.quiet = true;
    try {
      if (this.deliverFn) this.answers.withdrawAll(this.vm!, this.deliverFn);
    } finally {
      this.stop.quiet = false;
    }
    // No guest code runs past here; another session may run while the base image loads.
    setGuestClock(undefined);
    const base = await baseImage(wasm);
    // From the live memory where it can be (no 1.4 MB copy): nothing runs in the VM until it is encoded.
    let encoded: ReturnType<typeof encodeSnapshot>;
    try {
      encoded = encodeSnapshot(liveState(this.vm!) ?? this.vm!.snapshot(), base, this.guestToken, this.limits.maxSnapshotBytes);
    } catch (err) {
      if (err instanceof SnapshotTooLarge) return this.fail(err.message, "snapshot_limit_exceeded");
      throw err;
    }
    return suspendedOutcome(reason, encoded, pendingRefs, this.outputBytes, t0);
  }

  /** This session's hold on the worker thread (./busy.ts); its task id is the pool's. */
  readonly held = new ThreadHold();
  /** Runs `start` (which puts the program in motion), then drains until the segment ends; the outcome says how long the VM held the thread. */
  async run(start: () => void, wasm: WebAssembly.Module): Promise<TaskOutcome> {
    const outcome = await this.drive(start, wasm);
    if (outcome.status === "failed") outcome.error = boundedError(outcome.error, this.limits.maxOutputBytes - outcome.outputBytes);
    this.player?.finish();
    return { ...outcome, cpuMs: Math.round(this.held.ms), ...(this.recorder ? { tape: this.recorder.tape } : {}) };
  }

  private async drive(start: () => void, wasm: WebAssembly.Module): Promise<TaskOutcome> {
    enter(this);
    this.takeThread();
    try {
      try {
        start();
        for (;;) {
          // The engine may have dropped an interrupt and returned normally: the stop stands.
          if (this.stop.stopped) return this.outcomeFor(undefined);
          this.vm!.executePendingJobs();
          if (this.stop.fatal) return this.fail(this.stop.fatal.message, this.stop.fatal.code);
          if (this.stop.stopped) return this.outcomeFor(undefined);
          // The seed: completed only when the value settled and no work is pending
          // (nested calls, timers, yields); a failure ends the run at once.
          if (this.settled && (!this.settled.ok || this.pending.size === 0)) break;
          this.fireDueTimers();
          // A staged answer's verdict is already on its way (./staged-answers.ts): take it before suspending for a drain or a yield.
          if (this.suspendRequested && this.inbox.length === 0 && this.pending.size > 0 && !this.answers.due)
            return await this.suspend(this.idleReason(), wasm);
          if (this.inbox.length === 0 && this.player) {
            if (this.pending.size === 0) {
              return this.fail("code mode program is awaiting a promise that can never settle (no tool calls are pending).");
            }
            // A replay: what happened next to the idle VM comes from its record.
            const next = this.player.next();
            if (!next) return this.fail("the replay stopped here", "internal_error");
            if ("suspend" in next) return await this.suspend(next.suspend, wasm);
            for (const t of next.batch) {
              const m = mainMessageOf(t);
              if (m) this.inbox.push(m);
            }
          }
          if (this.inbox.length === 0) {
            if (this.pending.size === 0) {
              return this.fail("code mode program is awaiting a promise that can never settle (no tool calls are pending).");
            }
            if (this.hasPendingYield() && !this.answers.due) return await this.suspend("yield", wasm);
            const now = Date.now();
            // Only people's approvals left: suspend, after a moment in which a decision sent
            // right behind its approval-pending answer is taken live instead.
            let approvalGraceLeft = Number.POSITIVE_INFINITY;
            if (!this.answers.due && this.onlyApprovalsLeft()) {
              this.approvalsOnlySince ??= now;
              approvalGraceLeft = APPROVAL_GRACE_MS - (now - this.approvalsOnlySince);
              if (approvalGraceLeft <= 0) return await this.suspend("approval", wasm);
            } else this.approvalsOnlySince = undefined;
            const remaining = this.stop.deadline - now;
            if (remaining <= 0) return await this.suspend(this.idleReason(), wasm);
            // Idle long enough on tool answers: a checkpoint in the store, and the VM waits on.
            const eligible = !this.neverSuspends && !this.player && !this.answers.due && checkpointable(this.pending, this.approvalCalls);
            const checkpointIn = this.checkpoints?.dueIn(now, eligible) ?? Number.POSITIVE_INFINITY;
            if (checkpointIn <= 0) {
              await this.checkpoint(wasm);
              continue;
            }
            const sleep = Math.min(remaining + 1, Math.max(0, this.timers.nextDue() - now), approvalGraceLeft, checkpointIn);
            this.idle = true;
            this.releaseThread();
            if (cohosted()) this.parkIfIdle();
            await new Promise<void>((resolve) => {
              const timer = setTimeout(resolve, sleep);
              this.wake = () => {
                clearTimeout(timer);
                resolve();
              };
            });
            this.wake = undefined;
            // Moved to another thread from its parked image while a neighbour held this one.
            if (!stillOwned(this.claim)) return this.fail("moved to another worker thread", "internal_error");
            this.idle = false;
            this.takeThread();
            this.dirty = true;
            const cancelled = this.stop.cancelReason();
            if (cancelled !== undefined) return this.fail(`code mode exec was cancelled: ${cancelled}`, "internal_error");
            this.fireDueTimers();
            if (this.inbox.length === 0 && Date.now() > this.stop.deadline) return await this.suspend(this.idleReason(), wasm);
          }
          this.recorder?.batch(this.inbox);
          if (this.inbox.length > 0) this.checkpoints?.ran();
          while (this.inbox.length > 0) {
            const m = this.inbox.shift()!;
            if (this.deliverFn) this.answers.take(this.vm!, this.deliverFn, m, this.pending, this.stop.due);
          }
        }
      } catch (err) {
        // A trap or a host failure may leave the instance inconsistent: never reuse it.
        if (!(err instanceof JSException)) this.healthy = false;
        return this.outcomeFor(err);
      }
      return completion(this.settled, this.outputBytes, this.limits.maxOutputBytes, this.source);
    } finally {
      leave(this);
      this.releaseThread();
      this.port.off("message", this.onMessage);
      // Nothing of this session may touch the instance once it is handed back.
      const vm = this.vm;
      this.vm = undefined;
      this.deliverFn = undefined;
      if (vm && this.recycle) this.recycle(vm, this.healthy);
      else {
        try {
          vm?.dispose();
        } catch {
          // a trapped instance is dropped either way
        }
      }
    }
  }

  dispose(): void {
    this.port.off("message", this.onMessage);
  }
}

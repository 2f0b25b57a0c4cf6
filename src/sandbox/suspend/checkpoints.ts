/**
 * A live VM's checkpoints, on the sidecar's main thread. A VM idle on tool answers posts
 * its snapshot (../worker/idle-checkpoint.ts); it is sealed and stored as a suspension is,
 * but the run stays claimed by this sidecar while the VM lives, so no wait takes it then,
 * and a wait on any sidecar resumes it once this one is gone. From then on the calls it
 * lists take their answers through the store, which keeps them before the VM sees them.
 * A stored snapshot (a checkpoint, or the one a wait resumed) holds only while the VM sends
 * no nested call: before the next one goes out, the run is marked lost in the store, so no
 * resume can repeat the call. While the store cannot be reached that call is held, and the
 * invalidation tried again until the VM ends; a VM that parks first never sent it, and its
 * run is kept at the stored snapshot. Only VMs idle past checkpointAfterMs, and waits, pay
 * these store calls (docs/architecture.md#life-of-a-checkpoint).
 */
import { randomUUID } from "node:crypto";
import { ServiceError } from "../../protocol/service-error.js";
import { isApprovalMark, type AnswerMeta, type GatewayAnswer, type SuspendReason } from "../../shared/link-wire.js";
import { isStoreUnavailable } from "../../shared/store-errors.js";
import { pauseAfter, sleep, untilDeadline, withRetries } from "../link/retry.js";
import { approvalRequired } from "../exec/approvals.js";
import type { Segment, SegmentCheckpoints } from "../exec/segment.js";
import type { CheckpointMessage } from "../pool/pool-contract.js";
import type { PendingRef } from "../pool/task-protocol.js";
import { CLAIM_LEASE_MS, collect } from "./resume.js";
import { handOverLate, sealRun, type SuspendContext } from "./suspension.js";

const LINK_DEADLINE_MS = 10_000;
/** The abort reason of a segment's end: one value, so an abort makes no error (and captures no stack) per segment. */
const VM_ENDED = Object.freeze(new Error("the segment's VM ended"));
/** The orchestrator, or its store, cannot be reached (or did not answer in time): an outage, not an answer. */
const unavailable = (err: unknown) => err instanceof ServiceError && err.code === "unavailable";

/** The stored snapshot's own data, unsealed: what `keepStored` stores again. */
type ResumePoint = { envelope: Uint8Array; pending: PendingRef[]; reason: SuspendReason; outputBytes: number };

/** A nested call held for the store: which, since when, the tries that failed, and the last failure. */
type Hold = { callId: string; toolName: string; since: number; tries: number; err: unknown };

export class Checkpoints implements SegmentCheckpoints {
  private readonly token: string;
  /** The store's generation of the run (0: not stored). */
  private generation: number;
  /** The run is in the store, claimed by `token`. */
  private stored: boolean;
  /** The stored snapshot still matches the VM: a nested call must invalidate it first. */
  private valid: boolean;
  /** The valid stored snapshot's data, kept while it is valid (a few KB to a few hundred). */
  private resumePoint: ResumePoint | undefined;
  /** Checkpoints on their way to the store. */
  private taking = 0;
  /** One store call at a time, in the order the VM asked for them. */
  private chain: Promise<unknown> = Promise.resolve();
  /** An invalidation failed: no nested call may go out any more. */
  private broken = false;
  /**
   * A checkpoint whose store call failed unclearly (the store timed out): a stalled store may
   * still take it later, so until an invalidation at this generation says whether it landed,
   * it counts as stored and valid (a resume of it must never repeat a call).
   */
  private maybe: number | undefined;
  private ended = false;
  /** Aborted when the VM ends: the tries of a held call's invalidation stop. */
  private readonly vmEnded = new AbortController();
  /** The VM ended while a nested call was held for the store: that call (and any after it) was never sent. */
  private dropped: Hold | undefined;
  /** Calls whose answers come through the store. */
  private readonly handedOver = new Set<string>();
  /** An exec's own poll for those answers (a wait's poll hands them here). */
  private poll: { stop: AbortController; done: Promise<void> } | undefined;
  private readonly seen = new Set<string>();

  /** `ctx.claim`: a wait's claim, whose stored snapshot counts as a checkpoint; `polls`: read stored answers here (an exec). */
  constructor(
    private readonly seg: Segment,
    private readonly ctx: SuspendContext,
    private readonly polls: boolean,
  ) {
    this.token = ctx.claim?.token ?? randomUUID();
    this.generation = ctx.claim?.generation ?? 0;
    this.stored = this.valid = ctx.claim !== undefined;
    const from = ctx.claim?.from;
    if (from && ctx.claim) {
      const pending = [...ctx.claim.pending.values()].map((p) =>
        p.dueAtMs !== undefined ? { callId: p.callId, kind: p.kind, dueAtMs: p.dueAtMs } : { callId: p.callId, kind: p.kind },
      );
      this.resumePoint = { ...from, pending };
    }
  }

  get heldBack(): boolean {
    return this.dropped !== undefined;
  }

  take(m: CheckpointMessage): void {
    if (this.ended || this.broken || this.dropped) return;
    this.taking++;
    void this.next(() => this.store(m)).finally(() => this.taking--);
  }

  beforeCall(call: { callId: string; toolName: string }): Promise<boolean> | undefined {
    if (this.broken || this.dropped) return Promise.resolve(false);
    if (!this.valid && this.maybe === undefined && this.taking === 0) return undefined;
    return this.next(() => this.invalidate(call));
  }

  answerFromStore(callId: string, a: GatewayAnswer, _times: AnswerMeta): void {
    if (!this.handedOver.has(callId) || this.seg.answers.has(callId)) return;
    const made = this.seg.made.get(callId);
    if (isApprovalMark(a)) {
      const name = made?.toolName || made?.toolId || "";
      if (this.ctx.config.approvalMode === "error") this.seg.answer(callId, approvalRequired(name, a.approval.reason));
      else if (!this.seg.awaitingApproval.has(callId)) this.seg.awaitApproval(callId, made?.toolId ?? "", made?.toolName ?? "", a.approval, false);
      return;
    }
    this.seg.answerFromStore(callId, a);
  }

  async end(): Promise<{ token: string; generation: number } | undefined> {
    this.ended = true;
    this.vmEnded.abort(VM_ENDED);
    await this.chain;
    // A checkpoint that may have been stored is settled first, so the run ends from a known
    // state; after a call held back for the store, `keepStored` settles it once the store answers.
    if (this.maybe !== undefined && !this.dropped) await this.next(() => this.settleMaybe());
    this.poll?.stop.abort(VM_ENDED);
    await this.poll?.done;
    return this.stored ? { token: this.token, generation: this.generation } : undefined;
  }

  /**
   * After `end`, when a call was held back (`heldBack`): logs the held call's outcome, and
   * settles the store in the background once it answers. `park`: the VM parked (its deadline,
   * a drain, a yield), so the run is kept at its stored snapshot when that is still valid;
   * true when it is. The VM's own state is never stored then: it awaits a call the gateway
   * never got. Why the stored snapshot is still a correct resume point: no call went out
   * after it (the held one was dropped, and any after it queued behind it), and the answers
   * the VM consumed since are the ones it lists, each kept by the store before the VM got it
   * (a checkpoint's calls are handed over; a wait's calls were the stored run's). A resumed
   * VM consumes the same answers and makes the held call again, for the first time.
   */
  keepStored(park: boolean): { kept: boolean; err: unknown } {
    const hold = this.dropped!;
    const kept = park && this.stored && this.valid;
    this.logHold(hold, kept ? "kept" : park ? "unkept" : "dropped");
    void this.settleLater(kept);
    return { kept, err: hold.err };
  }

  private next<T>(op: () => Promise<T>): Promise<T> {
    const p = this.chain.then(op);
    this.chain = p.catch(() => undefined);
    return p;
  }

  /** Seals and stores one checkpoint, claimed by this VM; any failure leaves the run as it was. */
  private async store(m: CheckpointMessage): Promise<void> {
    const { ctx, seg } = this;
    // A person is asked about a call (the VM may not know yet): no checkpoint until it is decided.
    if (this.ended || this.broken || ctx.signal.aborted || seg.awaitingApproval.size > 0) return;
    // The cell's session-store writes so far are committed first, as a suspension commits them.
    if (await seg.commitSession()) return;
    const generation = this.generation + 1;
    const sealed = sealRun(seg, { ...m, reason: "pending_tools" }, ctx, generation);
    if (typeof sealed === "string") return void seg.log.info({ why: sealed }, "checkpoint not taken: too large to store");
    const request = {
      run: sealed.run,
      reclaim: this.stored,
      claimToken: this.token,
      checkpoint: true,
      leaseMs: CLAIM_LEASE_MS,
      sidecarId: ctx.link.sidecarId,
    };
    let res;
    try {
      res = await withRetries(() => ctx.link.rpc.suspendRun(request, { deadlineMs: LINK_DEADLINE_MS }), unavailable);
    } catch (err) {
      // The write may still land (a stalled store runs what timed out): the next call settles it first.
      this.maybe = generation;
      return void seg.log.warn(
        { err, generation },
        "could not store a checkpoint; the VM goes on without it, and its next call first invalidates it in case it landed",
      );
    }
    if (res.refused) return void seg.log.info({ refused: res.refused }, "the store refused a checkpoint; the VM goes on without it");
    this.stored = this.valid = true;
    this.generation = generation;
    this.resumePoint = { envelope: m.envelope, pending: m.pending, reason: "pending_tools", outputBytes: m.outputBytes };
    // From here on the calls it lists are answered through the store, which keeps each answer first.
    const calls = new Set(sealed.pending.filter((p) => p.kind === "call").map((p) => p.callId));
    for (const id of calls) this.handedOver.add(id);
    for (const [id, a] of sealed.included) this.seen.add(isApprovalMark(a) ? `${id}#approval` : id);
    seg.handOver(calls);
    await handOverLate(seg, ctx, sealed);
    seg.log.info({ generation, pending: sealed.pending.length, snapshotBytes: sealed.bytes }, "run checkpointed");
    if (this.polls && !this.ended) this.startPoll();
  }

  /** One InvalidateRun of the run at `generation` with this claim: whether the store invalidated it. */
  private async invalidateAt(generation: number, signal?: AbortSignal): Promise<boolean> {
    const { ctx } = this;
    const request = { scope: ctx.scope, codeModeRunId: ctx.codeModeRunId, claimToken: this.token, generation: BigInt(generation) };
    const res = await ctx.link.rpc.invalidateRun(request, { deadlineMs: LINK_DEADLINE_MS, ...(signal ? { signal } : {}) });
    return res.invalidated;
  }

  /**
   * Settles a checkpoint that may have been stored: an invalidation at its generation either
   * finds it (it landed: now it is lost, never resumed) or not (it never landed: the run is as
   * it was). Throws when the store cannot say.
   */
  private async settleOnce(signal?: AbortSignal): Promise<void> {
    const g = this.maybe;
    if (g === undefined) return;
    const landed = await this.invalidateAt(g, signal);
    this.maybe = undefined;
    if (!landed) return;
    this.seg.log.info({ generation: g }, "a checkpoint whose store call had failed had landed; it is invalidated");
    this.stored = true;
    this.valid = false;
    this.generation = g + 1;
    this.resumePoint = undefined;
  }

  /** `settleOnce` with a few quick tries, as the VM ends; nothing may go out once it failed. */
  private async settleMaybe(): Promise<void> {
    try {
      await withRetries(() => this.settleOnce(), unavailable, 5);
    } catch (err) {
      this.seg.log.warn({ err }, "could not settle a checkpoint whose store call had failed");
      this.broken = true;
    }
  }

  /**
   * Before the VM's next call goes out: settles a checkpoint that may have been stored, then
   * marks the valid stored snapshot lost; false: the call must not go out. When the orchestrator
   * or its store cannot be reached, the call is held (and what the VM sends after it: the
   * segment's EventGate) and the invalidation tried again, with pauses, until it lands or the
   * VM ends, whichever comes first: the segment's own deadline bounds it, and the VM's clock
   * runs meanwhile, as it does while it awaits any answer. A clear answer of the store (the
   * claim is no longer current) or any other error ends it as before: the call is not sent,
   * and the segment is cancelled.
   */
  private async invalidate(call: { callId: string; toolName: string }): Promise<boolean> {
    let hold: Hold | undefined;
    for (;;) {
      if (this.broken || this.dropped) return false;
      // Once held, a try is cut short when the VM ends; the first is not (it is the usual path).
      const signal = hold ? this.vmEnded.signal : undefined;
      try {
        await this.settleOnce(signal);
        if (!this.valid) {
          if (hold) this.logHold(hold, "sent");
          return true;
        }
        if (await this.invalidateAt(this.generation, signal)) {
          this.valid = false;
          this.generation++;
          this.resumePoint = undefined;
          if (hold) this.logHold(hold, "sent");
          return true;
        }
        this.broken = true;
        if (hold) this.logHold(hold, "refused");
        else this.seg.log.warn({ generation: this.generation }, "the run's claim was lost: its next nested call is not sent");
        return false;
      } catch (err) {
        // (A try cut short by the VM's end fails `unavailable` too.)
        if (!unavailable(err)) {
          this.broken = true;
          const held = hold ? { heldMs: Date.now() - hold.since, tries: hold.tries } : {};
          this.seg.log.warn({ err, callId: call.callId, ...held }, "could not invalidate the run's checkpoint: its next nested call is not sent");
          return false;
        }
        if (!hold) hold = { ...call, since: Date.now(), tries: 0, err };
        else if (!this.ended) hold.err = err;
        hold.tries++;
        if (!this.ended) await sleep(pauseAfter(hold.tries), this.vmEnded.signal);
        // The VM ended first: the call is never sent. A try that timed out may still land: `keepStored` settles that.
        if (this.ended) {
          this.dropped = hold;
          return false;
        }
      }
    }
  }

  /** The one log line of a call held for the store, with its outcome. */
  private logHold(hold: Hold, outcome: "sent" | "refused" | "kept" | "unkept" | "dropped"): void {
    const which = isStoreUnavailable(hold.err) ? "the orchestrator's store" : "the orchestrator";
    const fields = { callId: hold.callId, toolName: hold.toolName, heldMs: Date.now() - hold.since, tries: hold.tries, err: hold.err };
    const held = `held a nested call while ${which} could not be reached (the run's stored checkpoint must be invalidated before a call goes out)`;
    if (outcome === "sent") return void this.seg.log.warn(fields, `${held}: the invalidation landed and the call went out`);
    if (outcome === "refused") return void this.seg.log.warn(fields, `${held}: the store then refused it (the run's claim was lost): the call is not sent`);
    if (outcome === "kept")
      return void this.seg.log.warn(
        { ...fields, generation: this.generation },
        `${held}: the VM parked first, so the call was not sent; the run is kept at its stored checkpoint, stored again once the store answers`,
      );
    if (outcome === "unkept")
      return void this.seg.log.warn(
        fields,
        `${held}: the VM parked first, so the call was not sent; no valid stored snapshot is left to keep, so the run ends`,
      );
    this.seg.log.warn(fields, `${held}: the VM ended first (it failed or was cancelled), so the call was not sent; the run ends as the VM did`);
  }

  /**
   * After a call held back for the store: once the store answers (tried with pauses, for up to a
   * claim's lease), a checkpoint that may have been stored is settled, and a kept run's snapshot
   * is stored again, unclaimed, at the next generation, so any wait resumes it. Why again: a try
   * of the invalidation that timed out may still land (a stalled store runs what it received),
   * which would drop a snapshot that is still a correct resume point. So it is invalidated here
   * for certain, then stored again; a late try after that finds the claim gone and changes
   * nothing. A store that answers has run what it received before on the same connection.
   */
  private async settleLater(kept: boolean): Promise<void> {
    const { ctx, seg } = this;
    const log = seg.log;
    const since = Date.now();
    const untilMs = since + CLAIM_LEASE_MS;
    const counted = { n: 0 };
    const retry = <T>(op: () => Promise<T>): Promise<T> => untilDeadline(op, unavailable, untilMs, counted);
    const point = kept ? this.resumePoint : undefined;
    let generation = this.generation;
    let lost = false;
    try {
      const maybe = this.maybe;
      if (maybe !== undefined && (await retry(() => this.invalidateAt(maybe)))) {
        // It landed over the valid snapshot: now lost, one generation on. The snapshot before it still holds.
        log.info({ generation: maybe }, "a checkpoint whose store call had failed had landed; it is invalidated");
        generation = maybe + 1;
        lost = true;
      }
      if (!kept) return;
      if (!point) {
        // No data to store it again (a caller that gave none): released as it is, which a late try may have invalidated.
        const req = { codeModeRunId: ctx.codeModeRunId, claimToken: this.token, keep: true };
        const { released } = await retry(() => ctx.link.rpc.releaseRun(req, { deadlineMs: LINK_DEADLINE_MS }));
        return void log.warn({ released, generation }, "released the run's claim, keeping its stored snapshot as the store has it");
      }
      if (!lost && !(await retry(() => this.invalidateAt(generation)))) {
        return void log.warn({ generation }, "could not keep the run at its stored checkpoint: the run's claim is no longer current");
      }
      if (!lost) generation++;
      const sealed = sealRun(seg, point, ctx, generation + 1);
      if (typeof sealed === "string") return void log.warn({ why: sealed }, "could not keep the run at its stored checkpoint");
      const request = { run: sealed.run, reclaim: true, claimToken: this.token };
      const res = await retry(() => ctx.link.rpc.suspendRun(request, { deadlineMs: LINK_DEADLINE_MS }));
      if (res.refused) return void log.warn({ refused: res.refused }, "the store refused the run's stored checkpoint again; the run is lost");
      log.info(
        { generation: generation + 1, pending: sealed.pending.length, afterMs: Date.now() - since, tries: counted.n },
        "the store answered again: the run is kept at its stored checkpoint, unclaimed, and a wait resumes it",
      );
    } catch (err) {
      log.warn({ err, tries: counted.n }, "could not settle the run's stored checkpoint after a held call: the store keeps what it has");
    }
  }

  /** An exec's poll for stored answers to its handed-over calls, until the segment ends. */
  private startPoll(): void {
    if (this.poll) return;
    const stop = new AbortController();
    const { ctx, seg } = this;
    const onAnswer = (id: string, a: GatewayAnswer, t: AnswerMeta) => this.answerFromStore(id, a, t);
    const done = collect(ctx.link, ctx.codeModeRunId, this.token, this.seen, onAnswer, stop.signal, Number.POSITIVE_INFINITY, false, seg.log).then(
      (current) => {
        if (!current && !this.ended) seg.cancel("the run's claim was lost (it was closed, or its lease passed)");
      },
    );
    this.poll = { stop, done };
  }
}

/**
 * A live VM's checkpoints, on the sidecar's main thread. A VM idle on tool answers posts
 * its snapshot (../worker/idle-checkpoint.ts); it is sealed and stored as a suspension is,
 * but the run stays claimed by this sidecar while the VM lives, so no wait takes it then,
 * and a wait on any sidecar resumes it once this one is gone. From then on the calls it
 * lists take their answers through the store, which keeps them before the VM sees them.
 * A stored snapshot (a checkpoint, or the one a wait resumed) holds only while the VM sends
 * no nested call: before the next one goes out, the run is marked lost in the store, so no
 * resume can repeat the call. Only VMs idle past checkpointAfterMs, and waits, pay these
 * store calls (docs/architecture.md#life-of-a-checkpoint).
 */
import { randomUUID } from "node:crypto";
import { ServiceError } from "../../protocol/service-error.js";
import { isApprovalMark, type AnswerMeta, type GatewayAnswer } from "../../shared/link-wire.js";
import { withRetries } from "../link/retry.js";
import { approvalRequired } from "../exec/approvals.js";
import type { Segment, SegmentCheckpoints } from "../exec/segment.js";
import type { CheckpointMessage } from "../pool/pool-contract.js";
import { CLAIM_LEASE_MS, collect } from "./resume.js";
import { handOverLate, sealRun, type SuspendContext } from "./suspension.js";

const LINK_DEADLINE_MS = 10_000;
const unavailable = (err: unknown) => err instanceof ServiceError && err.code === "unavailable";

export class Checkpoints implements SegmentCheckpoints {
  private readonly token: string;
  /** The store's generation of the run (0: not stored). */
  private generation: number;
  /** The run is in the store, claimed by `token`. */
  private stored: boolean;
  /** The stored snapshot still matches the VM: a nested call must invalidate it first. */
  private valid: boolean;
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
  }

  take(m: CheckpointMessage): void {
    if (this.ended || this.broken) return;
    this.taking++;
    void this.next(() => this.store(m)).finally(() => this.taking--);
  }

  beforeCall(): Promise<boolean> | undefined {
    if (this.broken) return Promise.resolve(false);
    if (!this.valid && this.maybe === undefined && this.taking === 0) return undefined;
    return this.next(() => this.invalidate());
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
    await this.chain;
    // A checkpoint that may have been stored is settled first, so the run ends from a known state.
    if (this.maybe !== undefined) await this.next(() => this.settleMaybe());
    this.poll?.stop.abort();
    await this.poll?.done;
    return this.stored ? { token: this.token, generation: this.generation } : undefined;
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
    // From here on the calls it lists are answered through the store, which keeps each answer first.
    const calls = new Set(sealed.pending.filter((p) => p.kind === "call").map((p) => p.callId));
    for (const id of calls) this.handedOver.add(id);
    for (const [id, a] of sealed.included) this.seen.add(isApprovalMark(a) ? `${id}#approval` : id);
    seg.handOver(calls);
    await handOverLate(seg, ctx, sealed);
    seg.log.info({ generation, pending: sealed.pending.length, snapshotBytes: sealed.bytes }, "run checkpointed");
    if (this.polls && !this.ended) this.startPoll();
  }

  /**
   * Settles a checkpoint that may have been stored: an invalidation at its generation either
   * finds it (it landed: now it is lost, never resumed) or not (it never landed: the run is as
   * it was). False when the store cannot say: nothing may go out then.
   */
  private async settleMaybe(): Promise<boolean> {
    const g = this.maybe;
    if (g === undefined) return true;
    const { ctx, seg } = this;
    const request = { scope: ctx.scope, codeModeRunId: ctx.codeModeRunId, claimToken: this.token, generation: BigInt(g) };
    try {
      const res = await withRetries(() => ctx.link.rpc.invalidateRun(request, { deadlineMs: LINK_DEADLINE_MS }), unavailable, 5);
      this.maybe = undefined;
      if (res.invalidated) {
        seg.log.info({ generation: g }, "a checkpoint whose store call had failed had landed; it is invalidated");
        this.stored = true;
        this.valid = false;
        this.generation = g + 1;
      }
      return true;
    } catch (err) {
      seg.log.warn({ err }, "could not settle a checkpoint whose store call had failed: its next nested call is not sent");
      this.broken = true;
      return false;
    }
  }

  /** Marks the stored snapshot lost before the VM's next call goes out; false: the call must not go out. */
  private async invalidate(): Promise<boolean> {
    if (this.broken) return false;
    if (!(await this.settleMaybe())) return false;
    if (!this.valid) return true;
    const { ctx, seg } = this;
    const request = { scope: ctx.scope, codeModeRunId: ctx.codeModeRunId, claimToken: this.token, generation: BigInt(this.generation) };
    try {
      const res = await withRetries(() => ctx.link.rpc.invalidateRun(request, { deadlineMs: LINK_DEADLINE_MS }), unavailable, 5);
      if (res.invalidated) {
        this.valid = false;
        this.generation++;
        return true;
      }
      seg.log.warn({ generation: this.generation }, "the run's claim was lost: its next nested call is not sent");
    } catch (err) {
      seg.log.warn({ err }, "could not invalidate the run's checkpoint: its next nested call is not sent");
    }
    this.broken = true;
    return false;
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

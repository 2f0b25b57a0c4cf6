/**
 * Nested tool calls this sidecar has sent to a gateway, and what became of them. A call
 * whose VM is alive here takes its answer directly. Any other answer is routed to the
 * orchestrator (the call may belong to a suspended run); when the orchestrator does not
 * know the call either, what this sidecar remembers explains the misuse precisely:
 * another scope's call (PERMISSION_DENIED), a second answer (ALREADY_EXISTS), an answer
 * after its exec ended (FAILED_PRECONDITION), or an unknown id (NOT_FOUND). A call may
 * first be marked as awaiting a person's approval; a decision after its expiry is
 * FAILED_PRECONDITION. Settled and ended ids are remembered for REMEMBER_MS (REMEMBER of
 * them at most), then forgotten. Another tenant's call is unknown to the caller, never its
 * tenant's misuse: NOT_FOUND, as for an id nobody made (the answer must not confirm it).
 */
import { LRUCache } from "lru-cache";
import { ServiceError } from "../../protocol/service-error.js";
import type { PlainError } from "../pool/task-protocol.js";
import { approvalExpired, isApprovalMark, type ApprovalMark, type GatewayAnswer } from "../../shared/link-wire.js";
import { tenantOfScopeKey } from "../../shared/scope.js";

/** Whether two different scope keys are of one tenant (read only when they differ). */
const sameTenant = (a: string, b: string) => tenantOfScopeKey(a) === tenantOfScopeKey(b);

export type Approval = ApprovalMark["approval"];

export type LiveCall = {
  callId: string;
  scopeKey: string;
  toolId: string;
  toolName: string;
  parentCallId: string;
  startedAtMs: number;
  deliver(answer: { ok: true; json: string } | { ok: false; error: PlainError }): void;
  /** A call whose VM runs here: lets it parse an answer's text while the text is checked (../pool/pool-contract.ts). */
  stage?(text: string | Uint8Array): void;
  unstage?(): void;
  /**
   * The gateway said a person is being asked: returns the approval as kept (its expiry
   * clamped to the run's approvalTimeoutMs), or undefined when the call was answered
   * instead (approvalMode "error"). Absent: the call cannot wait for approval.
   */
  onApproval?(mark: Approval): Approval | undefined;
  /** Set while the call awaits a person's approval. */
  approval?: Approval;
  /** Filled when answered. */
  outcome?: { ok: boolean; errorMessage: string; durationMs: number };
};

type Gone = { scopeKey: string; why: "answered" | "ended" | "expired" };

/** Settled and ended ids remembered at most, and for how long (a retried or stray answer comes within seconds). */
const REMEMBER = 50_000;
const REMEMBER_MS = 10 * 60_000;
/** How often forgotten ids are swept (lru-cache drops them lazily otherwise). */
const PURGE_EVERY_MS = 30_000;

export class CallRegistry {
  private readonly live = new Map<string, LiveCall>();
  private readonly gone = new LRUCache<string, Gone>({ max: REMEMBER, ttl: REMEMBER_MS });

  constructor() {
    setInterval(() => this.gone.purgeStale(), PURGE_EVERY_MS).unref();
  }

  add(call: LiveCall): void {
    this.live.set(call.callId, call);
  }

  get liveCount(): number {
    return this.live.size;
  }

  private forget(callId: string, gone: Gone): void {
    this.gone.set(callId, gone);
  }

  /**
   * Delivers a gateway's answer (or approval mark) to a call whose VM is alive here.
   * Returns false when no live call has this id (route it onward); throws when it is
   * misuse this sidecar can already tell (another scope's call, a second answer or mark,
   * a decision after the approval expired).
   */
  answerLive(callId: string, scopeKey: string, answer: GatewayAnswer): boolean {
    const call = this.live.get(callId);
    if (!call) {
      const gone = this.gone.get(callId);
      if (gone && gone.scopeKey !== scopeKey) {
        if (!sameTenant(gone.scopeKey, scopeKey)) return false;
        throw new ServiceError("permission_denied", `tool call ${callId} belongs to a different run scope`);
      }
      if (gone?.why === "answered") throw new ServiceError("already_exists", `tool call ${callId} was already answered`);
      if (gone?.why === "expired") throw expiredError(callId);
      return false;
    }
    if (call.scopeKey !== scopeKey) {
      // Another tenant's call is not there for this caller: routed on, it is NOT_FOUND.
      if (!sameTenant(call.scopeKey, scopeKey)) return false;
      throw new ServiceError("permission_denied", `tool call ${callId} belongs to a different run scope`);
    }
    if (isApprovalMark(answer)) {
      if (call.approval) throw new ServiceError("already_exists", `tool call ${callId} already awaits approval`);
      if (!call.onApproval)
        throw new ServiceError("failed_precondition", `tool call ${callId} cannot wait for approval here: answer it with a result or an error`);
      const kept = call.onApproval(answer.approval);
      if (kept && this.live.get(callId) === call) call.approval = kept;
      return true;
    }
    if (call.approval && Date.now() >= call.approval.expiresAtMs) {
      this.expire(callId);
      throw expiredError(callId);
    }
    this.settle(call, scopeKey, answer, "answered");
    return true;
  }

  private settle(call: LiveCall, scopeKey: string, answer: { ok: true; json: string } | { ok: false; error: PlainError }, why: Gone["why"]): void {
    this.live.delete(call.callId);
    call.outcome = { ok: answer.ok, errorMessage: answer.ok ? "" : answer.error.message, durationMs: Date.now() - call.startedAtMs };
    // Remembered once the answer is on its way to the VM: nothing in between reads it.
    try {
      call.deliver(answer);
    } finally {
      this.forget(call.callId, { scopeKey, why });
    }
  }

  /** A live call's approval ran out: the guest gets ApprovalExpired, and a late decision is refused. False when it is not live here awaiting approval. */
  expire(callId: string): boolean {
    const call = this.live.get(callId);
    if (!call?.approval) return false;
    this.settle(call, call.scopeKey, approvalExpired(call.toolName || call.toolId, call.approval), "expired");
    return true;
  }

  /** The error for an answer nobody could take: what this sidecar remembers of the call. */
  explainUndeliverable(callId: string, scopeKey: string): ServiceError {
    const gone = this.gone.get(callId);
    if (!gone || (gone.scopeKey !== scopeKey && !sameTenant(gone.scopeKey, scopeKey)))
      return new ServiceError("not_found", `no nested tool call with id ${callId} is known to this sidecar or awaited by a suspended run`);
    if (gone.scopeKey !== scopeKey) return new ServiceError("permission_denied", `tool call ${callId} belongs to a different run scope`);
    if (gone.why === "answered") return new ServiceError("already_exists", `tool call ${callId} was already answered`);
    if (gone.why === "expired") return expiredError(callId);
    return new ServiceError("failed_precondition", `the exec that made tool call ${callId} already ended; the answer was dropped`);
  }

  /**
   * Hands a large answer's text (a string, or its exact UTF-8 bytes) to the VM of live
   * call `callId` before it is validated, so both happen at once; returns how to take it
   * back if the text is refused. Undefined when the call is not live here for this scope
   * (`answerLive` then says why) or has no VM.
   */
  stage(callId: string, scopeKey: string, text: string | Uint8Array): (() => void) | undefined {
    const call = this.live.get(callId);
    if (!call?.stage || call.scopeKey !== scopeKey) return undefined;
    call.stage(text);
    return () => call.unstage?.();
  }

  /** The exec ended: its unanswered calls can no longer be delivered. */
  endAll(calls: Iterable<LiveCall>): void {
    for (const c of calls) {
      if (this.live.get(c.callId) === c) {
        this.live.delete(c.callId);
        this.forget(c.callId, { scopeKey: c.scopeKey, why: "ended" });
      }
    }
  }
}

function expiredError(callId: string): ServiceError {
  return new ServiceError(
    "failed_precondition",
    `the approval of tool call ${callId} expired; the decision was dropped (the program was told ApprovalExpired)`,
  );
}

/**
 * Nested tool calls this sidecar has sent to a gateway, and what became of them. A call
 * whose VM is alive here takes its answer directly. Any other answer is routed to the
 * orchestrator (the call may belong to a suspended run); when the orchestrator does not
 * know the call either, what this sidecar remembers explains the misuse precisely:
 * another scope's call (PERMISSION_DENIED), a second answer (ALREADY_EXISTS), an answer
 * after its exec ended (FAILED_PRECONDITION), or an unknown id (NOT_FOUND). Settled and
 * ended ids are remembered for REMEMBER_MS (REMEMBER of them at most), then forgotten.
 */
import { LRUCache } from "lru-cache";
import { ServiceError } from "../../protocol/service-error.js";
import type { PlainError } from "../pool/task-protocol.js";

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
  /** Filled when answered. */
  outcome?: { ok: boolean; errorMessage: string; durationMs: number };
};

type Gone = { scopeKey: string; why: "answered" | "ended" };

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
   * Delivers a gateway's answer to a call whose VM is alive here. Returns false when no
   * live call has this id (route the answer onward); throws when the answer is misuse
   * this sidecar can already tell (another scope's call, a second answer).
   */
  answerLive(callId: string, scopeKey: string, answer: { ok: true; json: string } | { ok: false; error: PlainError }): boolean {
    const call = this.live.get(callId);
    if (!call) {
      const gone = this.gone.get(callId);
      if (gone && gone.scopeKey !== scopeKey) throw new ServiceError("permission_denied", `tool call ${callId} belongs to a different run scope`);
      if (gone?.why === "answered") throw new ServiceError("already_exists", `tool call ${callId} was already answered`);
      return false;
    }
    if (call.scopeKey !== scopeKey) throw new ServiceError("permission_denied", `tool call ${callId} belongs to a different run scope`);
    this.live.delete(callId);
    this.forget(callId, { scopeKey, why: "answered" });
    call.outcome = { ok: answer.ok, errorMessage: answer.ok ? "" : answer.error.message, durationMs: Date.now() - call.startedAtMs };
    call.deliver(answer);
    return true;
  }

  /** The error for an answer nobody could take: what this sidecar remembers of the call. */
  explainUndeliverable(callId: string, scopeKey: string): ServiceError {
    const gone = this.gone.get(callId);
    if (!gone) return new ServiceError("not_found", `no nested tool call with id ${callId} is known to this sidecar or awaited by a suspended run`);
    if (gone.scopeKey !== scopeKey) return new ServiceError("permission_denied", `tool call ${callId} belongs to a different run scope`);
    if (gone.why === "answered") return new ServiceError("already_exists", `tool call ${callId} was already answered`);
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

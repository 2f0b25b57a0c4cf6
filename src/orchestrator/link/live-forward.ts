/**
 * Forwards a tool answer to the sidecar whose *live* VM awaits it. A gateway answers a
 * nested call on whichever sidecar it reaches; when that sidecar has no live VM for the
 * call and no suspended run awaits it either, the call may be live on another sidecar.
 * The orchestrator sends the answer down every other attached sidecar's standing Attach
 * stream and returns as soon as one acks that its VM took it (or all said no, or a short
 * deadline passed). Each attached sidecar registers a `deliver` function here.
 */
import { randomUUID } from "node:crypto";
import type { Scope } from "../../shared/scope.js";
import type { GatewayAnswer } from "../../shared/link-wire.js";

type Deliver = (requestId: string, scope: Scope, callId: string, answer: GatewayAnswer) => void;

/** How long the orchestrator waits for the sidecars' acks. */
const ACK_DEADLINE_MS = 3_000;

export class LiveForwarder {
  private readonly sidecars = new Map<string, Deliver>();
  private readonly waiting = new Map<string, { remaining: number; done(delivered: boolean): void }>();

  attach(sidecarId: string, deliver: Deliver): void {
    this.sidecars.set(sidecarId, deliver);
  }

  detach(sidecarId: string): void {
    this.sidecars.delete(sidecarId);
  }

  /** A sidecar's reply to a forwarded answer. */
  ack(requestId: string, delivered: boolean): void {
    const w = this.waiting.get(requestId);
    if (!w) return;
    w.remaining--;
    if (delivered || w.remaining <= 0) w.done(delivered);
  }

  /** True when some other sidecar's live VM took the answer. */
  forward(originSidecarId: string, scope: Scope, callId: string, answer: GatewayAnswer): Promise<boolean> {
    const targets = [...this.sidecars].filter(([id]) => id !== originSidecarId);
    if (targets.length === 0) return Promise.resolve(false);
    const requestId = randomUUID();
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => finish(false), ACK_DEADLINE_MS);
      timer.unref();
      const finish = (delivered: boolean) => {
        if (!this.waiting.delete(requestId)) return;
        clearTimeout(timer);
        resolve(delivered);
      };
      this.waiting.set(requestId, { remaining: targets.length, done: finish });
      for (const [, deliver] of targets) {
        try {
          deliver(requestId, scope, callId, answer);
        } catch {
          this.ack(requestId, false);
        }
      }
    });
  }
}

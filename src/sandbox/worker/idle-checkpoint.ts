/**
 * Checkpoints of an idle VM: a VM that has waited `checkpointAfterMs` for tool answers
 * with nothing else to do is snapshotted as a suspension would be, but keeps its instance
 * and goes on waiting; the snapshot is posted to the main thread, which stores it in the
 * background (../suspend/checkpoints.ts), so another sidecar can resume the run if this
 * one dies. One per idle stretch: the VM running anything starts the clock again. The
 * session (./vm-session.ts) says when its VM is eligible; this module keeps the clock and
 * encodes. Nothing here runs guest code or touches the replay tape.
 */
import type { MessagePort } from "node:worker_threads";
import type { QuickJS } from "quickjs-wasi";
import type { PendingKind, PendingRef, WorkerMessage } from "../pool/task-protocol.js";
import { baseImage } from "./base-image.js";
import { liveState } from "./instance-reset.js";
import { SNAPSHOT_BUDGET_MS } from "./outcomes.js";
import { encodeSnapshot, SnapshotTooLarge } from "./snapshot-codec.js";

/** What a checkpoint is taken of. */
export type CheckpointSource = {
  vm: QuickJS;
  guestToken: number;
  wasm: WebAssembly.Module;
  maxSnapshotBytes: number;
  /** The segment's deadline: the host's kill timer goes back to it once the snapshot is encoded. */
  deadline: number;
  pending: PendingRef[];
  outputBytes: number;
  port: MessagePort;
};

/**
 * Whether what an idle VM awaits allows a checkpoint: tool answers (none of them a person's
 * approval, `asking`) and timers only. The session adds its own conditions (it can suspend,
 * is no replay, has no staged answer due).
 */
export function checkpointable(pending: ReadonlyMap<string, PendingKind>, asking: ReadonlySet<string>): boolean {
  let call = false;
  for (const [id, kind] of pending) {
    if (kind === "call" && !asking.has(id)) call = true;
    else if (kind !== "timer") return false;
  }
  return call;
}

export class IdleCheckpoint {
  /** Since when the VM has run nothing (undefined: it runs, or has not gone idle yet). */
  private idleSince: number | undefined;
  /** A checkpoint was taken in this idle stretch. */
  private taken = false;

  constructor(private readonly afterMs: number) {}

  /** The VM ran something: its next checkpoint waits for a whole idle stretch. */
  ran(): void {
    this.idleSince = undefined;
    this.taken = false;
  }

  /** How long until a checkpoint is due (0: now; Infinity: none), for a VM that is idle now and `eligible`. */
  dueIn(now: number, eligible: boolean): number {
    if (this.taken || !eligible) return Number.POSITIVE_INFINITY;
    this.idleSince ??= now;
    return Math.max(0, this.idleSince + this.afterMs - now);
  }

  /** Encodes the idle VM and posts it as a `checkpoint`; a snapshot over maxSnapshotBytes is none (the VM goes on without). */
  async take(s: CheckpointSource): Promise<void> {
    this.taken = true;
    s.port.postMessage({ t: "watch", untilMs: Math.max(s.deadline, Date.now() + SNAPSHOT_BUDGET_MS) } satisfies WorkerMessage);
    try {
      const base = await baseImage(s.wasm);
      const { envelope } = encodeSnapshot(liveState(s.vm) ?? s.vm.snapshot(), base, s.guestToken, s.maxSnapshotBytes);
      const whole = envelope.byteOffset === 0 && envelope.byteLength === envelope.buffer.byteLength;
      s.port.postMessage(
        { t: "checkpoint", envelope, pending: s.pending, outputBytes: s.outputBytes } satisfies WorkerMessage,
        whole ? [envelope.buffer as ArrayBuffer] : [],
      );
    } catch (err) {
      if (!(err instanceof SnapshotTooLarge)) throw err;
    } finally {
      s.port.postMessage({ t: "watch", untilMs: s.deadline } satisfies WorkerMessage);
    }
  }
}

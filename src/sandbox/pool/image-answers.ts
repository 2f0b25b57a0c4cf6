/**
 * Which tool answers a parked VM image may not hold yet, so a run continued from it (on
 * another thread, ./pool-task.ts) is given them again. The worker consumes every answer it
 * has received before its VM goes idle, and it parks only when idle; so an image holds
 * every answer the worker had received on its port when it parked, and lacks those still in
 * flight then, plus (for a run already continued from an image) those that image lacked.
 * The worker stamps each message with how many answers it had received (`rx`), so the
 * answers it certainly holds are dropped here, and this list stays as short as the answers
 * in flight. A duplicate answer is harmless: the VM ignores an answer for a call it no
 * longer awaits.
 */
import type { AnswerMessage } from "./task-protocol.js";

export class ImageAnswers {
  /** Answers the current image was never given (a continued run's start), until its VM parks anew. */
  private carried: AnswerMessage[] = [];
  /** Answers posted on the current attempt's port that the worker had not reported receiving. */
  private posted: AnswerMessage[] = [];
  /** Answers of this port before `posted[0]`. */
  private base = 0;

  /** A new attempt: continuing from the current image (returns the answers it lacks), or from the start. */
  startAttempt(fromImage: boolean): AnswerMessage[] {
    this.carried = fromImage ? [...this.carried, ...this.posted] : [];
    this.posted = [];
    this.base = 0;
    return this.carried.slice();
  }

  /** An answer was posted to the attempt's worker (or, between attempts, is held for the next). */
  sent(m: AnswerMessage): void {
    this.posted.push(m);
  }

  /** The worker had received `rx` answers on this attempt's port when it posted a message. */
  received(rx: number): void {
    const drop = rx - this.base;
    if (drop <= 0) return;
    this.posted.splice(0, drop);
    this.base = rx;
  }

  /** The VM parked a new image after receiving `rx` answers: the image holds all of those. */
  parked(rx: number): void {
    this.received(rx);
    this.carried = [];
  }

  /** The answers a run continued from the current image must be given. */
  forImage(): AnswerMessage[] {
    return [...this.carried, ...this.posted];
  }
}

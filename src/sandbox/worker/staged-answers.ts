/**
 * Host answers into the VM, and large answers parsed in the VM while the main thread is
 * still validating their text.
 *
 * A gateway's 0.7 MB answer (W5 of the bench, 5,000 rows) was checked on the main thread
 * (JSON.parse and the nesting cap, about 2.5 ms) before it was posted here, and only then
 * parsed by the guest, one after the other. Now the main thread posts a large text first
 * (`stage`), the guest parses it into a slot only the bridge can reach (the prelude's
 * `deliver`, mode 1, ../guest/prelude-bridge.ts), and the verdict follows on the same port:
 * the answer marked `staged` (settle the call from the parsed value) or `unstage` (forget
 * it; the call stays pending and the gateway may answer again). The main thread's check
 * stays the only judge of what is accepted; nothing parsed ahead reaches the program
 * before it. A parse the guest refuses ahead (out of memory, say) is simply done again at
 * settlement, as for any answer, so what the program sees is what it saw before.
 */
import { JSException, type JSValueHandle, type QuickJS } from "quickjs-wasi";
import type { MainMessage, PendingKind } from "../task-protocol.js";

/** The prelude's `deliver` modes (../guest/prelude-bridge.ts). */
const SETTLE = 0;
const PARSE_AHEAD = 1;
const FORGET = 2;
const SETTLE_FROM_AHEAD = 3;

/** Calls the prelude's `deliver(callId, ok, json, mode)`. */
function callDeliver(vm: QuickJS, fn: JSValueHandle, callId: string, ok: boolean, json: string, mode = SETTLE): void {
  const id = vm.newString(callId);
  const text = vm.newString(json);
  const how = mode === SETTLE ? undefined : vm.newNumber(mode);
  try {
    const args = how ? [id, ok ? vm.true : vm.false, text, how] : [id, ok ? vm.true : vm.false, text];
    vm.callFunction(fn, vm.undefined, ...args).dispose();
  } finally {
    id.dispose();
    text.dispose();
    how?.dispose();
  }
}

/** One session's answers, and the texts staged on its port until their verdict. */
export class StagedAnswers {
  /** By call id: the text, or "" once the guest holds its parsed value (the text need not be copied in again). */
  private readonly texts = new Map<string, string>();

  /**
   * Hands one inbox message to the VM through the prelude's `deliver` (`fn`): an answer
   * settles its call if the VM still awaits it (taking it out of `pending`); a staged
   * text is parsed ahead; a withdrawn one forgotten.
   */
  take(vm: QuickJS, fn: JSValueHandle, m: MainMessage, pending: Map<string, PendingKind>, interrupted: () => boolean): void {
    if (m.t === "stage") {
      if (pending.get(m.callId) === "call") this.stage(vm, fn, m.callId, m.json, interrupted);
      return;
    }
    if (m.t === "unstage") return this.withdraw(vm, fn, m.callId);
    if (m.t !== "answer" || !pending.delete(m.callId)) return;
    if (!m.ok) callDeliver(vm, fn, m.callId, false, JSON.stringify(m.error));
    else if (m.staged) this.settle(vm, fn, m.callId);
    else callDeliver(vm, fn, m.callId, true, m.json);
  }

  /** Some staged text awaits its verdict (which the main thread posts right behind it). */
  get due(): boolean {
    return this.texts.size > 0;
  }

  /**
   * Parses `json` ahead for call `callId`. A JavaScript error from the guest's parse is
   * left for the settlement to meet again; an interrupt (deadline, cancel) is not swallowed.
   */
  private stage(vm: QuickJS, fn: JSValueHandle, callId: string, json: string, interrupted: () => boolean): void {
    this.texts.set(callId, json);
    try {
      callDeliver(vm, fn, callId, true, json, PARSE_AHEAD);
      this.texts.set(callId, "");
    } catch (err) {
      if (!(err instanceof JSException) || interrupted()) throw err;
      err.dispose();
    }
  }

  /** Settles call `callId` from what the guest parsed ahead, or else from the staged text. */
  private settle(vm: QuickJS, fn: JSValueHandle, callId: string): void {
    const json = this.texts.get(callId);
    if (json === undefined) throw new Error(`the answer to ${callId} was marked staged, but no text was staged for it on this port`);
    this.texts.delete(callId);
    callDeliver(vm, fn, callId, true, json, SETTLE_FROM_AHEAD);
  }

  /** The text was refused: the guest forgets what it parsed ahead. */
  private withdraw(vm: QuickJS, fn: JSValueHandle, callId: string): void {
    if (this.texts.delete(callId)) callDeliver(vm, fn, callId, false, "", FORGET);
  }

  /**
   * Before a snapshot (the deadline passed with a verdict still due): the restored VM holds
   * nothing parsed ahead; the answer, if accepted, is delivered as text after the restore.
   */
  withdrawAll(vm: QuickJS, fn: JSValueHandle): void {
    for (const callId of [...this.texts.keys()]) this.withdraw(vm, fn, callId);
  }
}

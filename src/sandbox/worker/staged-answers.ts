/**
 * Host answers into the VM, and large answers parsed in the VM while the main thread is
 * still validating their text.
 *
 * The main thread posts a large text's UTF-8 bytes first (`stage`); QuickJS parses them
 * (./host-json.ts) into a slot only the bridge can reach (../guest/prelude-bridge.ts), and
 * the verdict follows on the same port: `staged` (settle the call from the parsed value) or
 * `unstage` (forget it; the call stays pending). The main thread's check stays the only
 * judge of what is accepted: nothing parsed ahead may reach the program before it. A text
 * that does not parse ahead is parsed by the guest at settlement, as any answer. The last
 * value parsed ahead is also held after its call settled, so its memory is not freed object
 * by object before the instance is reset, if its parse took at most 1/HOLD_FRACTION of the
 * run's memory limit (./heap-size.ts;
 * docs/module-notes.md#srcsandboxworkerstaged-answersts).
 */
import { JSException, type JSValueHandle, type QuickJS } from "quickjs-wasi";
import type { MainMessage, PendingKind } from "../pool/task-protocol.js";
import { parseJsonBytes } from "./host-json.js";
import { allocatedBy } from "./heap-size.js";

/** The prelude's `deliver` modes (../guest/prelude-bridge.ts). */
const SETTLE = 0;
const KEEP_PARSED = 1;
const FORGET = 2;
const SETTLE_FROM_AHEAD = 3;
const SETTLE_AND_HOLD = 4;
const LET_GO = 5;

/** The share of a run's memory limit an answer's parsed value may take to be held (mode 4). */
export const HOLD_FRACTION = 16;

/** Staged bytes back to the text the main thread holds (a leading U+FEFF kept, as it was there). */
const utf8 = new TextDecoder("utf-8", { ignoreBOM: true });

/** Calls the prelude's `deliver(callId, ok, json, mode)`; `json` is a text, or for KEEP_PARSED a parsed value. */
function callDeliver(vm: QuickJS, fn: JSValueHandle, callId: string, ok: boolean, json: string | JSValueHandle, mode = SETTLE): void {
  const id = vm.newString(callId);
  const text = typeof json === "string" ? vm.newString(json) : undefined;
  const how = mode === SETTLE ? undefined : vm.newNumber(mode);
  try {
    const payload = text ?? (json as JSValueHandle);
    const args = how ? [id, ok ? vm.true : vm.false, payload, how] : [id, ok ? vm.true : vm.false, payload];
    vm.callFunction(fn, vm.undefined, ...args).dispose();
  } finally {
    id.dispose();
    text?.dispose();
    how?.dispose();
  }
}

/** One session's answers, and the texts staged on its port until their verdict. */
export class StagedAnswers {
  /** By call id: the staged UTF-8 bytes, or once the guest holds the value, what its parse allocated (Infinity: unknown). */
  private readonly texts = new Map<string, Uint8Array | number>();
  /** `holdBytes`: the most a parsed value may take for the prelude to hold it after settling. */
  constructor(private readonly holdBytes: number) {}

  /**
   * Hands one inbox message to the VM through the prelude's `deliver` (`fn`): an answer
   * settles its call if the VM still awaits it (taking it out of `pending`); a staged
   * text is parsed ahead; a withdrawn one forgotten.
   */
  take(vm: QuickJS, fn: JSValueHandle, m: MainMessage, pending: Map<string, PendingKind>, interrupted: () => boolean): void {
    if (m.t === "stage") {
      if (pending.get(m.callId) === "call") this.stage(vm, fn, m.callId, m.bytes, interrupted);
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
   * Parses `bytes` ahead for call `callId` and gives the value to the guest to keep. A
   * text that does not parse, or a JavaScript error while the guest stores the value, is
   * left for the settlement to meet again; an interrupt (deadline, cancel) is not swallowed.
   */
  private stage(vm: QuickJS, fn: JSValueHandle, callId: string, bytes: Uint8Array, interrupted: () => boolean): void {
    this.texts.set(callId, bytes);
    const { result: value, bytes: allocated } = allocatedBy(vm, () => parseJsonBytes(vm, bytes));
    if (!value) return;
    try {
      callDeliver(vm, fn, callId, true, value, KEEP_PARSED);
      this.texts.set(callId, allocated ?? Number.POSITIVE_INFINITY);
    } catch (err) {
      if (!(err instanceof JSException) || interrupted()) throw err;
      err.dispose();
    } finally {
      value.dispose();
    }
  }

  /** Settles call `callId` from what the guest holds parsed, or else from the staged text. */
  private settle(vm: QuickJS, fn: JSValueHandle, callId: string): void {
    const staged = this.texts.get(callId);
    if (staged === undefined) throw new Error(`the answer to ${callId} was marked staged, but no text was staged for it on this port`);
    this.texts.delete(callId);
    if (typeof staged !== "number") return callDeliver(vm, fn, callId, true, utf8.decode(staged), SETTLE_FROM_AHEAD);
    callDeliver(vm, fn, callId, true, "", staged <= this.holdBytes ? SETTLE_AND_HOLD : SETTLE_FROM_AHEAD);
  }

  /** The text was refused: the guest forgets what it parsed ahead. */
  private withdraw(vm: QuickJS, fn: JSValueHandle, callId: string): void {
    if (this.texts.delete(callId)) callDeliver(vm, fn, callId, false, "", FORGET);
  }

  /**
   * Before a snapshot: the restored VM holds nothing parsed ahead (a verdict still due when
   * the deadline passed: the answer, if accepted, is delivered as text after the restore),
   * nor a value the program let go of. The prelude is told to let go whether or not this
   * session gave it one to hold: a VM moved from another thread (parked) may hold one.
   */
  withdrawAll(vm: QuickJS, fn: JSValueHandle): void {
    for (const callId of [...this.texts.keys()]) this.withdraw(vm, fn, callId);
    callDeliver(vm, fn, "held", false, "", LET_GO);
  }
}

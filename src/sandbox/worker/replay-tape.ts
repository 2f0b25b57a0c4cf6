/**
 * What one segment's VM consumed from its host, kept so the segment can be re-run exactly
 * (docs/replay.md): every clock read (run-length encoded), Math.random's seed, the call ids
 * handed out, each batch of inbox messages drained into the VM between two job runs (the
 * batch boundaries change the program's order), where it suspended, and the interrupt poll
 * at which it was stopped; and what it sent (calls, requests, yields, output), to compare.
 *
 * `TapeRecorder` writes one during a live segment, keeping at most MAX_TAPE_BYTES of texts
 * (past that it notes where it was cut). `TapePlayer` serves one to a replayed segment and
 * notes the first place where the replay asks for something the tape does not hold. A
 * secret answer is kept as a mark: the replay stops there and says so.
 */
import { createHash } from "node:crypto";
import type { AnswerMessage, MainMessage, SuspendReason, WorkerMessage } from "../pool/task-protocol.js";
import type { Tape, TapeEvent, TapeMessage, TapeSent } from "./tape-format.js";

export type { Tape, TapeEvent, TapeMessage, TapeSent };

/** The most a segment's tape keeps of texts (answers, inputs, output, seeds, ids). */
export const MAX_TAPE_BYTES = 1 << 20;
/** Texts a tape compares by hash past this length (call inputs, output items). */
const INLINE_TEXT_BYTES = 4096;

function digest(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/** A text inline when short, else its hash. */
function textOrHash(text: string, key: "input" | "payload" | "data"): Record<string, string> {
  return text.length <= INLINE_TEXT_BYTES ? { [key]: text } : { h: digest(text) };
}

/** Replaces a sent message's texts by their hash (in place). */
function hashTexts(s: TapeSent): void {
  const o = s as Record<string, string | undefined>;
  for (const key of ["input", "payload", "data"]) {
    const text = o[key];
    if (text === undefined) continue;
    delete o[key];
    o.h = digest(text);
  }
}

/** The form of a sent message both sides compare. */
export function sentOf(m: WorkerMessage): TapeSent | undefined {
  if (m.t === "call") return { call: m.callId, via: m.via, target: m.target, path: m.path, ...textOrHash(m.inputJson, "input") };
  if (m.t === "request") return { request: m.reqId, op: m.op, ...textOrHash(m.payloadJson, "payload") };
  if (m.t === "yield") return { yield: m.callId, reason: m.reason };
  if (m.t === "output") return { output: m.kind, ...textOrHash(m.data, "data") };
  return undefined;
}

export class TapeRecorder {
  readonly tape: Tape = { clock: [], seeds: [], ids: [], events: [], sent: [], polls: 0 };
  private bytes = 0;
  private lastClock = 0;

  private keep(n: number): boolean {
    if (this.tape.truncated) return false;
    this.bytes += n;
    if (this.bytes <= MAX_TAPE_BYTES) return true;
    this.tape.truncated = `the segment's record passed ${MAX_TAPE_BYTES} bytes`;
    return false;
  }

  readonly clock = (): number => {
    const now = Date.now();
    const c = this.tape.clock;
    if (c.length > 0 && now === this.lastClock) c[c.length - 1]!++;
    else if (this.keep(8)) {
      c.push(now - this.lastClock, 1);
      this.lastClock = now;
    }
    return now;
  };

  seed(json: string): void {
    if (this.keep(json.length)) this.tape.seeds.push(json);
  }

  /** The VM read a catalog text from its host. */
  read(what: "all_tools" | "convenience"): void {
    const read = (this.tape.read ??= []);
    if (!read.includes(what)) read.push(what);
  }

  id(callId: string): void {
    if (this.keep(callId.length + 3)) this.tape.ids.push(callId);
  }

  sent(m: WorkerMessage): void {
    const s = sentOf(m);
    if (!s) return;
    // After a secret answer, what the VM sends may carry it: only hashes are kept.
    if (this.tape.tainted) hashTexts(s);
    // Sized from its texts (each at most INLINE_TEXT_BYTES or a hash): no copy per nested call.
    let size = 48;
    for (const v of Object.values(s)) size += typeof v === "string" ? v.length : 0;
    if (this.keep(size)) this.tape.sent.push(s);
  }

  batch(messages: readonly MainMessage[]): void {
    if (messages.length === 0) return;
    if (messages.some((m) => m.t === "answer" && m.secret)) this.tape.tainted = true;
    // Sized before anything is copied: a large answer past the cap costs nothing more.
    let size = 16;
    for (const m of messages) size += sizeOf(m);
    if (!this.keep(size)) return;
    const batch: TapeMessage[] = [];
    for (const m of messages) {
      const t = tapeMessage(m);
      if (t) batch.push(t);
    }
    if (batch.length > 0) this.tape.events.push({ batch });
  }

  suspended(reason: SuspendReason): void {
    if (this.keep(16)) this.tape.events.push({ suspend: reason });
  }

  /** One interrupt poll; `stop` says whether it told QuickJS to stop, `threw` whether it gave up on the engine. */
  poll(stop: boolean, threw: boolean, by: Tape["stopBy"]): void {
    this.tape.polls++;
    if (stop && this.tape.stopAtPoll === undefined) {
      this.tape.stopAtPoll = this.tape.polls;
      if (by) this.tape.stopBy = by;
    }
    if (threw) this.tape.throwAtPoll ??= this.tape.polls;
  }

  /** A segment that cannot be replayed from here on (its VM moved to another thread). */
  cut(why: string): void {
    this.tape.truncated ??= why;
  }
}

/** About what a message takes on the tape (its text, or its staged bytes as base64). */
function sizeOf(m: MainMessage): number {
  if (m.t === "answer") return 32 + (m.secret ? 0 : m.ok ? m.json.length : m.error.message.length + m.error.name.length);
  if (m.t === "stage") return 32 + Math.ceil(m.bytes.byteLength / 3) * 4;
  return 32;
}

/** A secret answer (the gateway said so) is kept as a mark; it is never staged (../exec-service.ts). */
function tapeMessage(m: MainMessage): TapeMessage | undefined {
  if (m.t === "answer") {
    if (m.secret) return { c: m.callId, secret: 1, ok: m.ok };
    if (!m.ok) return { c: m.callId, e: m.error };
    return m.staged ? { c: m.callId, j: m.json, staged: 1 } : { c: m.callId, j: m.json };
  }
  if (m.t === "stage") return { c: m.callId, stage: Buffer.from(m.bytes).toString("base64") };
  if (m.t === "unstage") return { c: m.callId, unstage: 1 };
  return undefined;
}

/** The inbox message a tape message stands for; undefined for a secret answer's mark. */
export function mainMessageOf(t: TapeMessage): MainMessage | undefined {
  if ("secret" in t) return undefined;
  if ("stage" in t) return { t: "stage", callId: t.c, bytes: new Uint8Array(Buffer.from(t.stage, "base64")) };
  if ("unstage" in t) return { t: "unstage", callId: t.c };
  if ("e" in t) return { t: "answer", callId: t.c, ok: false, error: t.e } satisfies AnswerMessage;
  return t.staged ? { t: "answer", callId: t.c, ok: true, json: t.j, staged: true } : { t: "answer", callId: t.c, ok: true, json: t.j };
}

/** Where a replay first did something its tape does not hold, or could not go on. */
export type TapeDivergence = { at: string; recorded: unknown; replayed: unknown };

export class TapePlayer {
  private clockAt = 0;
  private clockLeft = 0;
  private clockValue = 0;
  private seedAt = 0;
  private idAt = 0;
  private eventAt = 0;
  private sentAt = 0;
  private polls = 0;
  /** The first divergence; once set, the replayed VM is stopped at its next poll. */
  divergence: TapeDivergence | undefined;
  /** Set when the replay reached what the tape does not hold (a secret answer, a cut): it stops there, as not a divergence. */
  incomplete: string | undefined;

  constructor(readonly tape: Tape) {}

  private diverge(at: string, recorded: unknown, replayed: unknown): void {
    // Past the cut of a capped record nothing can be compared: the replay is incomplete there.
    if (this.tape.truncated) this.incomplete ??= `the record was cut (${this.tape.truncated})`;
    else this.divergence ??= { at, recorded, replayed };
  }

  get stopped(): boolean {
    return this.divergence !== undefined || this.incomplete !== undefined;
  }

  readonly clock = (): number => {
    if (this.clockLeft === 0) {
      const c = this.tape.clock;
      if (this.clockAt >= c.length) {
        this.diverge("clock", "no more clock reads", "a clock read");
        return this.clockValue;
      }
      this.clockValue += c[this.clockAt]!;
      this.clockLeft = c[this.clockAt + 1]!;
      this.clockAt += 2;
    }
    this.clockLeft--;
    return this.clockValue;
  };

  seed(): string {
    const s = this.tape.seeds[this.seedAt++];
    if (s === undefined) {
      this.diverge("seed", "no seed request", "a seed request");
      return "[1,2,3,4]";
    }
    return s;
  }

  id(): string {
    return this.tape.ids[this.idAt++] ?? `c_replay_${this.idAt}`;
  }

  /** The output the replayed VM produced, for its Result. */
  readonly outputs: Array<{ kind: "text" | "json"; data: string }> = [];

  /** Compares what the replayed VM sent with what the recorded one sent at the same place. */
  sent(m: WorkerMessage): void {
    if (m.t === "output") this.outputs.push({ kind: m.kind, data: m.data });
    const now = sentOf(m);
    if (!now || this.stopped) return;
    const count = ++this.counts[m.t as keyof typeof this.counts];
    if (m.t === "call") this.calls++;
    const then = this.tape.sent[this.sentAt++];
    const at = `${m.t === "call" ? "nested call" : m.t} ${count}`;
    if (then === undefined) return this.diverge(at, "nothing more", now);
    if (JSON.stringify(then) !== JSON.stringify(now)) this.diverge(at, then, now);
  }

  /** Nested calls the replayed VM made; what it sent of each kind, to name a divergence. */
  calls = 0;
  private readonly counts = { call: 0, request: 0, yield: 0, output: 0 };

  /** The next thing that happened to the idle VM: a batch of messages, or a suspension. */
  next(): TapeEvent | undefined {
    const e = this.tape.events[this.eventAt++];
    if (e === undefined) {
      this.diverge("an idle point", "the segment ended", "the program waits for more answers");
      return undefined;
    }
    if ("batch" in e) {
      const secret = e.batch.find((m) => "secret" in m);
      if (secret) {
        this.incomplete ??= `call ${secret.c} was answered with a secret the record does not keep`;
        return undefined;
      }
    }
    return e;
  }

  /** One interrupt poll: true when the recorded VM was told to stop here (or the replay must stop). */
  poll(): { stop: boolean; throw: boolean } {
    this.polls++;
    const t = this.tape;
    return {
      stop: this.stopped || (t.stopAtPoll !== undefined && this.polls >= t.stopAtPoll),
      throw: t.throwAtPoll !== undefined && this.polls >= t.throwAtPoll,
    };
  }

  /** After the segment ended: whatever of the tape it did not use is a divergence. */
  finish(): void {
    if (this.stopped || this.tape.truncated) return;
    if (this.sentAt < this.tape.sent.length) this.diverge("the end of the segment", this.tape.sent[this.sentAt], "nothing more");
    else if (this.eventAt < this.tape.events.length) this.diverge("the end of the segment", this.tape.events[this.eventAt], "the segment ended");
  }
}

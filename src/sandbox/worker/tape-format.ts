/**
 * The shape of a segment's replay tape (./replay-tape.ts writes and plays it): plain data,
 * kept in a replay record as JSON, and carried in a task's outcome. Types only, so the task
 * protocol can name it without importing the recorder.
 */
import type { SuspendReason } from "../../shared/link-wire.js";

/** A message drained into the VM: an answer (ok, error, or a secret one's mark), a staged text (base64) or its withdrawal. */
export type TapeMessage =
  | { c: string; j: string; staged?: 1 }
  | { c: string; e: { name: string; message: string } }
  | { c: string; secret: 1; ok: boolean }
  | { c: string; stage: string }
  | { c: string; unstage: 1 };

/** What the VM sent the host, as compared in a replay (`h`: a long text's sha256 instead of the text). */
export type TapeSent =
  | { call: string; via: string; target: string; path: string; input?: string; h?: string }
  | { request: string; op: string; payload?: string; h?: string }
  | { yield: string; reason: string }
  | { output: "text" | "json"; data?: string; h?: string };

export type TapeEvent = { batch: TapeMessage[] } | { suspend: SuspendReason };

export type Tape = {
  /** Clock reads as pairs: value delta from the previous run's value, then how many reads gave it. */
  clock: number[];
  seeds: string[];
  ids: string[];
  events: TapeEvent[];
  sent: TapeSent[];
  /** Interrupt polls the segment made; the poll that told QuickJS to stop, and the one that gave up on it. */
  polls: number;
  stopAtPoll?: number;
  throwAtPoll?: number;
  /** Why the VM was told to stop at `stopAtPoll`: its deadline, or a cancel with its reason. */
  stopBy?: { timeout: true } | { cancel: string };
  /** Catalog texts the VM read from its host ("all_tools", "convenience"): the record keeps those. */
  read?: string[];
  /**
   * Set once a secret answer reached the VM: from then on what it sent is kept as hashes, and
   * the segment's record keeps no value, error or model_json (all may be derived from it).
   */
  tainted?: true;
  /** Set when the tape is not whole: what the replay cannot reproduce past its end. */
  truncated?: string;
};

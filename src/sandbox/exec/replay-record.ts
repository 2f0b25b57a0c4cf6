/**
 * A code-mode segment's replay record (docs/replay.md#the-record): what the segment's VM
 * was started with (the program, or the resume of the run's previous segment), its tape
 * (../worker/replay-tape.ts: clock and random reads, call ids, answers as drained, where it
 * suspended or was stopped), how the VM ended, and the Result the gateway got with the
 * host's part of it (telemetry, pending calls), so a replay rebuilds `model_json` with this
 * build and compares it byte for byte. The orchestrator keeps the records of a code-mode run
 * in order; `Control.ReplayRun` re-runs them (../replay/). Each record carries a seal under
 * the sidecars' snapshot keys (../suspend/snapshot-seal.ts), which a rebuild by replay checks.
 */
import type { ExecTask, PendingRef, ResumeTask, TaskLimits, TaskOutcome, TaskSurface } from "../pool/task-protocol.js";
import type { Submission } from "../pool/pool-contract.js";
import { createHash } from "node:crypto";
import type { Tape } from "../worker/replay-tape.js";
import type { RecordSealContext, SnapshotSealer } from "../suspend/snapshot-seal.js";
import type { OutputItem, ResultInput, TelemetryInput } from "./result.js";

export const RECORD_VERSION = 1;

/** How a segment's VM ended, as the worker said (the part of a Result the VM decides). */
export type RecordedOutcome =
  | { status: "completed"; valueJson: string; outputBytes: number }
  | { status: "failed"; error: string; code?: string; outputBytes: number }
  | { status: "suspended"; reason: string; pending: string[]; outputBytes: number };

export type SegmentRecord = {
  v: typeof RECORD_VERSION;
  kind: "exec" | "wait";
  /** The build that recorded it (a replay on another build says so in its report). */
  build: { version: string; quickjs: string };
  startedAtMs: number;
  /**
   * The store's generation of the snapshot the segment resumed (0: an exec). A suspension it
   * ends in is generation `to`, or else `from + 1`, so a replay resumes each wait from the right segment
   * whatever order the records arrived in (two orchestrators may append them).
   */
  from?: number;
  /**
   * The generation its suspension was stored as, when checkpoints moved the store's
   * generation on during the segment (each checkpoint, and each invalidation, takes one).
   */
  to?: number;
  /** An exec's program and how its VM started; a wait resumes the VM the previous segment left. */
  exec?: {
    source: string;
    language: string;
    surface?: TaskSurface;
    sessionStore?: false;
    contextJson: string;
    staticJson: string;
    needsContext: boolean;
  };
  /** What a resumed VM awaited at its restore (a wait). */
  pending?: PendingRef[];
  limits: TaskLimits;
  /** The run's effective code-mode config (what the limits above were taken from). */
  config?: unknown;
  outputBytesUsed: number;
  /** The catalog texts the VM read (all_tools, convenience names), when it read them. */
  allToolsJson: string;
  convenienceJson: string;
  tape: Tape;
  outcome: RecordedOutcome;
  /** The Result the gateway got: what buildResult was given, and the model_json it made. */
  result: { input: ResultInput; telemetry: TelemetryInput; priorOutputs: OutputItem[]; modelJson: string };
  /**
   * The seal (`cmrs1:<key id>:<HMAC>`, ../suspend/snapshot-seal.ts `sealRecord`): always the
   * text's last member, over the text without it, bound to the run's id and scope. Absent from
   * records of builds that did not seal them; a replay of a record given whole ignores it.
   */
  seal?: string;
};

export function recordedOutcome(o: TaskOutcome): RecordedOutcome {
  if (o.status === "completed") return { status: "completed", valueJson: o.valueJson, outputBytes: o.outputBytes };
  if (o.status === "failed") return { status: "failed", error: o.error, ...(o.code ? { code: o.code } : {}), outputBytes: o.outputBytes };
  return { status: "suspended", reason: o.reason, pending: o.pending.map((p) => p.callId), outputBytes: o.outputBytes };
}

/** The start of a segment's record: what its task gave the VM. */
export function recordStart(submission: Submission, build: SegmentRecord["build"], startedAtMs: number): Omit<SegmentRecord, "tape" | "outcome" | "result"> {
  if (submission.kind === "exec") {
    const s = submission as Omit<ExecTask, "port" | "catalog"> & {
      catalog: { staticJson: string; allToolsJson: string; convenienceJson: string; needsContext: boolean };
    };
    return {
      v: RECORD_VERSION,
      kind: "exec",
      build,
      startedAtMs,
      exec: {
        source: s.source,
        language: s.language,
        ...(s.surface ? { surface: s.surface } : {}),
        ...(s.sessionStore === false ? { sessionStore: false as const } : {}),
        contextJson: s.contextJson,
        staticJson: s.catalog.staticJson,
        needsContext: s.catalog.needsContext,
      },
      limits: s.limits,
      outputBytesUsed: s.outputBytesUsed,
      allToolsJson: s.catalog.allToolsJson,
      convenienceJson: s.catalog.convenienceJson,
    };
  }
  const r = submission as Omit<ResumeTask, "port">;
  return {
    v: RECORD_VERSION,
    kind: "wait",
    build,
    startedAtMs,
    pending: r.pending,
    limits: r.limits,
    outputBytesUsed: r.outputBytesUsed,
    allToolsJson: r.allToolsJson ?? "[]",
    convenienceJson: r.convenienceJson ?? "[]",
  };
}

/**
 * A segment record whose VM received a secret answer keeps nothing derived from it: its
 * outcome's value or error and its Result become hashes, its output is left out. A replay
 * stops at the secret and never compares them.
 */
export function withoutSecrets(record: SegmentRecord): SegmentRecord {
  if (!record.tape.tainted) return record;
  const hash = (text: string) => `sha256:${createHash("sha256").update(text).digest("hex")}`;
  const o = record.outcome;
  const outcome: RecordedOutcome =
    o.status === "completed" ? { ...o, valueJson: hash(o.valueJson) } : o.status === "failed" ? { ...o, error: hash(o.error) } : o;
  const r = record.result.input;
  const input: ResultInput =
    r.status === "completed" ? { ...r, valueJson: JSON.stringify(hash(r.valueJson)) } : r.status === "failed" ? { ...r, error: hash(r.error) } : r;
  return { ...record, outcome, result: { input, telemetry: record.result.telemetry, priorOutputs: [], modelJson: hash(record.result.modelJson) } };
}

/**
 * A finished segment's record as JSON: its start, the VM's outcome and tape, and the Result
 * (nothing a secret gave), sealed for its run by `seal.sealer` as it is stored.
 */
export function segmentRecordJson(
  start: ReturnType<typeof recordStart>,
  ended: TaskOutcome,
  tape: Tape,
  extra: Pick<SegmentRecord, "from" | "to" | "config" | "result">,
  seal: (RecordSealContext & { sealer: SnapshotSealer }) | undefined,
): string {
  const read = new Set(tape.read ?? []);
  const record: SegmentRecord = {
    ...start,
    ...extra,
    // The catalog texts only if the VM read them (a replay gives the same texts to the same reads).
    allToolsJson: read.has("all_tools") ? start.allToolsJson : "[]",
    convenienceJson: read.has("convenience") ? start.convenienceJson : "[]",
    tape,
    outcome: recordedOutcome(ended),
  };
  const text = JSON.stringify(withoutSecrets(record));
  if (!seal) return text;
  const { sealer, codeModeRunId, scopeKey } = seal;
  return sealer.sealRecord(text, { codeModeRunId, scopeKey });
}

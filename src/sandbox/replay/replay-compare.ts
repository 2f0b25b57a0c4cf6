/**
 * How a replayed segment is judged against its record (docs/replay.md#the-report): the
 * tape's own checks first (calls, requests, yields and output compared as the VM sent them,
 * ../worker/replay-tape.ts), then how the VM ended, then the Result's `model_json`, rebuilt by
 * this build's buildResult from the replayed outcome and output with the recorded host part
 * (telemetry, pending calls' tools), and compared byte for byte.
 */
import { buildResult, type OutputItem, type ResultInput } from "../exec/result.js";
import { recordedOutcome, type RecordedOutcome, type SegmentRecord } from "../exec/replay-record.js";
import type { TaskOutcome } from "../pool/task-protocol.js";
import type { TapeDivergence } from "../worker/replay-tape.js";

export type Verdict = "same" | "diverged" | "incomplete";

export type SegmentReport = {
  index: number;
  kind: "exec" | "wait";
  verdict: Verdict | "not run";
  /** Nested calls the replayed VM made, each checked against the record. */
  calls: number;
  divergence?: TapeDivergence;
  incomplete?: string;
};

export type ReplayReport = {
  verdict: Verdict;
  summary: string;
  build: { recorded: SegmentRecord["build"] | undefined; replayed: SegmentRecord["build"] };
  codeModeRunId: string;
  segments: SegmentReport[];
};

/** How far apart two texts are, shown around the first byte that differs. */
function firstDifference(recorded: string, replayed: string): TapeDivergence {
  let i = 0;
  while (i < recorded.length && i < replayed.length && recorded[i] === replayed[i]) i++;
  const around = (s: string) => s.slice(Math.max(0, i - 40), i + 40);
  return { at: `model_json, offset ${i}`, recorded: around(recorded), replayed: around(replayed) };
}

/** The ResultInput the replayed VM's outcome gives, the host's part taken from the record. */
function replayedInput(seg: SegmentRecord, now: RecordedOutcome): ResultInput {
  const r = seg.result.input;
  if (now.status === "completed" && r.status === "completed") return { status: "completed", valueJson: now.valueJson };
  if (now.status === "failed" && r.status === "failed") {
    // The host words some failures itself: only a VM's own error is taken from the replay.
    const own = seg.outcome.status === "failed" && seg.outcome.error === r.error;
    return { ...r, error: own ? now.error : r.error };
  }
  if (now.status === "suspended" && r.status === "waiting") {
    const pending = new Set(now.pending);
    return { ...r, reason: now.reason as typeof r.reason, pending: r.pending.filter((p) => pending.has(p.callId)) };
  }
  return r;
}

/** Judges one replayed segment: undefined when it matched its record, else where it did not. */
export function compareSegment(seg: SegmentRecord, outcome: TaskOutcome, outputs: readonly OutputItem[]): TapeDivergence | undefined {
  const now = recordedOutcome(outcome);
  const then = seg.outcome;
  if (JSON.stringify(now) !== JSON.stringify(then)) return { at: "how the VM ended", recorded: then, replayed: now };
  const modelJson = buildResult(replayedInput(seg, now), [...seg.result.priorOutputs, ...outputs], seg.result.telemetry).modelJson ?? "";
  if (modelJson !== seg.result.modelJson) return firstDifference(seg.result.modelJson, modelJson);
  return undefined;
}

/** One sentence for a person. */
export function summaryOf(report: Omit<ReplayReport, "summary">): string {
  const n = report.segments.length;
  const where = (s: SegmentReport) => `segment ${s.index + 1} of ${n} (${s.kind})`;
  const bad = report.segments.find((s) => s.verdict === "diverged" || s.verdict === "incomplete");
  const other =
    report.build.recorded &&
    (report.build.recorded.version !== report.build.replayed.version || report.build.recorded.quickjs !== report.build.replayed.quickjs)
      ? ` (recorded on ${report.build.recorded.version}/quickjs-wasi ${report.build.recorded.quickjs}, replayed on ${report.build.replayed.version}/quickjs-wasi ${report.build.replayed.quickjs})`
      : "";
  if (!bad) return `same: ${n} segment${n === 1 ? "" : "s"}, the same calls with the same arguments and the same model_json${other}.`;
  if (bad.verdict === "incomplete") return `incomplete: the replay stopped in ${where(bad)}: ${bad.incomplete}; everything before it was the same${other}.`;
  const d = bad.divergence!;
  const show = (v: unknown) => (typeof v === "string" ? JSON.stringify(v) : JSON.stringify(v)).slice(0, 300);
  return `diverged in ${where(bad)} at ${d.at}: recorded ${show(d.recorded)}, replayed ${show(d.replayed)}${other}.`;
}

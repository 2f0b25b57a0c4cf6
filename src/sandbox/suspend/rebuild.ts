/**
 * Upgrades without losing parked runs: a run suspended by another sandbox build (its
 * snapshot's engine fingerprint is not this build's) is rebuilt here by replaying its replay
 * record up to that suspension (docs/replay.md#upgrades). When every segment that led to it
 * replays the same (the same calls with the same arguments, the same results), the rebuilt
 * VM, snapshotted by this build, is resumed in its place; a run whose replay diverges, or that
 * has no record, is refused with that reason.
 */
import type { Logger } from "../../shared/logger.js";
import type { Scope } from "../../shared/scope.js";
import type { OrchestratorLink } from "../link/orchestrator-link.js";
import type { PendingRef, TaskOutcome } from "../pool/task-protocol.js";

/**
 * True when a resume failed only because the snapshot was made by another build: the
 * restore said so (a flag, never the error text, which a program or a tool could write),
 * and no VM ran, so nothing it did is repeated when the segment runs again.
 */
export function madeByOtherBuild(outcome: TaskOutcome): boolean {
  return outcome.status === "failed" && outcome.otherBuild === true;
}

export type Rebuilt = { ok: true; envelope: Uint8Array; pending: PendingRef[] } | { ok: false; reason: string };

/** Replays the run's record on this build up to its suspension stored as `generation`. */
export async function rebuildByReplay(link: OrchestratorLink, scope: Scope, codeModeRunId: string, generation: number, log: Logger): Promise<Rebuilt> {
  const { segments } = await link.client.replayRecord({ scope, codeModeRunId }, { deadlineMs: 10_000 });
  if (segments.length === 0) return { ok: false, reason: "no replay record is kept for it (recordForReplay was off, or the record expired)" };
  // Loaded only here: an upgrade's first wait is the only place a sidecar replays.
  const { rebuildSuspension, runRecordOf } = await import("../replay/replay-runner.js");
  const t0 = performance.now();
  const { report, rebuilt } = await rebuildSuspension(runRecordOf(codeModeRunId, segments), generation);
  log.info(
    { codeModeRunId, generation, verdict: report.verdict, segments: report.segments.length, ms: Math.round(performance.now() - t0) },
    rebuilt ? "rebuilt a run suspended by another build by replaying its record" : "could not rebuild a run suspended by another build",
  );
  if (!rebuilt)
    return {
      ok: false,
      reason: report.verdict === "same" ? "its record does not reach the suspension" : `replaying its record on this build gave: ${report.summary}`,
    };
  return { ok: true, envelope: rebuilt.envelope, pending: rebuilt.pending };
}

/**
 * Upgrades without losing parked runs: a run suspended by another sandbox build (its
 * snapshot's engine fingerprint is not this build's) is rebuilt here by replaying its replay
 * record up to that suspension (docs/replay.md#upgrades). Every segment's seal is checked
 * first (./snapshot-seal.ts): the store keeps records in clear, and a record a store writer
 * edited would build the VM they chose. When every segment that led to the suspension
 * replays the same (the same calls with the same arguments, the same results), the rebuilt
 * VM, snapshotted by this build, is resumed in its place; a run whose record is unsealed,
 * fails its seal, diverges, or is missing is refused with that reason.
 */
import type { Logger } from "../../shared/logger.js";
import { scopeKeyOf, type Scope } from "../../shared/scope.js";
import type { OrchestratorLink } from "../link/orchestrator-link.js";
import type { PendingRef, TaskOutcome } from "../pool/task-protocol.js";
import { RecordAuthError, RecordKeyUnavailableError, type SnapshotSealer } from "./snapshot-seal.js";

/**
 * True when a resume failed only because the snapshot was made by another build: the
 * restore said so (a flag, never the error text, which a program or a tool could write),
 * and no VM ran, so nothing it did is repeated when the segment runs again.
 */
export function madeByOtherBuild(outcome: TaskOutcome): boolean {
  return outcome.status === "failed" && outcome.otherBuild === true;
}

/** `keep`: the run may be intact (its record is sealed under a key this sidecar lacks): it is left for a sidecar that has it. */
export type Rebuilt = { ok: true; envelope: Uint8Array; pending: PendingRef[] } | { ok: false; reason: string; keep?: true };

/**
 * The run's segment records as they were sealed (seals taken off), or why they cannot be
 * trusted: each must verify under this sidecar's keys for this run and scope.
 */
export function verifiedSegments(
  sealer: SnapshotSealer,
  scope: Scope,
  codeModeRunId: string,
  segments: readonly string[],
  log: Logger,
): { ok: true; texts: string[] } | { ok: false; reason: string; keep?: true } {
  const ctx = { codeModeRunId, scopeKey: scopeKeyOf(scope) };
  const texts: string[] = [];
  for (const [i, text] of segments.entries()) {
    try {
      texts.push(sealer.openRecord(text, ctx));
    } catch (err) {
      if (!(err instanceof RecordAuthError)) throw err;
      const at = `segment ${i + 1} of ${segments.length}`;
      if (err instanceof RecordKeyUnavailableError) {
        if (!sealer.shared) {
          // Per-process keys: a record another process sealed can never verify here.
          log.warn(
            { codeModeRunId, keyId: err.keyId },
            "cannot rebuild a run whose replay record another sidecar process sealed (no shared CODEMODE_SNAPSHOT_KEYS)",
          );
          return {
            ok: false,
            keep: true,
            reason: `its replay record was sealed by another sidecar process (key id "${err.keyId}"), and this sidecar has no shared snapshot key: configure the same CODEMODE_SNAPSHOT_KEY on every sidecar`,
          };
        }
        log.warn(
          { codeModeRunId, keyId: err.keyId, keyIds: sealer.keyIds },
          "cannot rebuild a run whose replay record is sealed under a key this sidecar does not have",
        );
        return {
          ok: false,
          keep: true,
          reason: `its replay record (${at}) was sealed under key id "${err.keyId}", which is not among this sidecar's snapshot keys (CODEMODE_SNAPSHOT_KEYS)`,
        };
      }
      if (err.unsealed) {
        log.warn({ codeModeRunId, segment: i + 1 }, "cannot rebuild a run whose replay record is not sealed");
        return { ok: false, reason: `its replay record (${at}) is not sealed, so it cannot be trusted to rebuild the run (${err.message})` };
      }
      log.error(
        { codeModeRunId, segment: i + 1, reason: err.message },
        "refused to rebuild a run whose replay record failed authentication (tampered with in the store)",
      );
      return { ok: false, reason: `its replay record failed authentication (${at}: ${err.message})` };
    }
  }
  return { ok: true, texts };
}

/**
 * Replays the run's record on this build up to its suspension stored as `generation`, once
 * every segment's seal verifies under `sealer` (this process's snapshot keys by default).
 */
export async function rebuildByReplay(
  link: OrchestratorLink,
  scope: Scope,
  codeModeRunId: string,
  generation: number,
  log: Logger,
  sealer: SnapshotSealer,
): Promise<Rebuilt> {
  const { segments } = await link.client.replayRecord({ scope, codeModeRunId }, { deadlineMs: 10_000 });
  if (segments.length === 0) return { ok: false, reason: "no replay record is kept for it (recordForReplay was off, or the record expired)" };
  // Nothing of a record runs before its seal is checked, on the texts as stored.
  const verified = verifiedSegments(sealer, scope, codeModeRunId, segments, log);
  if (!verified.ok) return verified;
  // Loaded only here: an upgrade's first wait is the only place a sidecar replays.
  const { rebuildSuspension, runRecordOf } = await import("../replay/replay-runner.js");
  const t0 = performance.now();
  const { report, rebuilt } = await rebuildSuspension(runRecordOf(codeModeRunId, verified.texts), generation);
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

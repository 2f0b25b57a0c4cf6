/**
 * Control's replay methods (docs/replay.md): GetReplayRecord hands out a code-mode run's
 * record as JSON (what `codemode replay --export` writes), and ReplayRun re-runs a run (its
 * stored record, or one given whole) in fresh VMs on a thread of this process and reports
 * "same", or where it first diverged or stopped. ReplayRun waits its turn there as its
 * caller's tenant's (../../sandbox/replay/replay-runner.ts `ReplayQueue`), or is refused
 * RESOURCE_EXHAUSTED when too many of that tenant's, or in all, are waiting.
 */
import type { Control } from "../../gen/codemode/orchestrator/v1/control_pb.js";
import type { RunScope } from "../../gen/codemode/common/v1/common_pb.js";
import type { ServiceHandlers } from "../../protocol/grpc-service.js";
import { ServiceError } from "../../protocol/service-error.js";
import type { Logger } from "../../shared/logger.js";
import { checkIdLength } from "../../shared/request-limits.js";
import { DEFAULT_TENANT, type Scope } from "../../shared/scope.js";
import { parseRunRecord, replayRecord, runRecordOf, type RunRecord } from "../../sandbox/replay/replay-runner.js";
import type { ReplayRecords } from "./replay-records.js";

type ReplayMethods = Pick<ServiceHandlers<typeof Control.method>, "getReplayRecord" | "replayRun">;

export function replayControlHandlers(replays: ReplayRecords, log: Logger, scopeOf: (s: RunScope | undefined) => Scope): ReplayMethods {
  const stored = async (scopeWire: RunScope | undefined, codeModeRunId: string): Promise<RunRecord> => {
    const scope = scopeOf(scopeWire);
    const id = codeModeRunId.trim();
    if (!id) throw new ServiceError("invalid_argument", "code_mode_run_id is required");
    checkIdLength("code_mode_run_id", id);
    const segments = await replays.segments(scope, id);
    // Another scope's (or tenant's) run is as unknown as one never recorded.
    if (segments.length === 0) throw new ServiceError("not_found", `no replay record is kept for code mode run ${id} in this scope`);
    const record = runRecordOf(id, segments);
    // Only later segments are kept when the run's record was dropped (its tenant's maxReplayBytes) while it went on.
    if (record.segments[0]!.kind !== "exec")
      throw new ServiceError(
        "not_found",
        `no whole replay record is kept for code mode run ${id}: its exec's record is not kept (dropped for its tenant's maxReplayBytes, or never stored), only later segments`,
      );
    return record;
  };
  return {
    async getReplayRecord(req) {
      const record = await stored(req.scope, req.codeModeRunId);
      return { recordJson: JSON.stringify(record), segments: record.segments.length };
    },
    async replayRun(req, ctx) {
      const record = req.recordJson ? parseRunRecord(req.recordJson) : await stored(req.scope, req.codeModeRunId);
      // The tenant the caller's token named: the queue takes turns between tenants.
      const report = await replayRecord(record, { priority: "request", key: ctx?.tenant ?? DEFAULT_TENANT });
      log.info({ codeModeRunId: record.codeModeRunId, verdict: report.verdict, segments: record.segments.length }, "replayed a code mode run");
      return { verdict: report.verdict, summary: report.summary, reportJson: JSON.stringify(report) };
    },
  };
}

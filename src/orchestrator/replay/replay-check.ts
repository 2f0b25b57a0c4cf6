/**
 * `--replay-check`: the orchestrator replays every code-mode run that finishes (its last
 * segment completed or failed) in the background and logs the verdict, a divergence as a
 * warning. For canarying a new build on real traffic, and for the test suite, which runs with
 * it on and fails on any divergence (docs/replay.md). Checks take the replay thread as the
 * lowest class of its queue (../../sandbox/replay/replay-runner.ts `ReplayQueue`), in turns
 * between tenants, and read their record only in their turn; a run that finds the check
 * class full is skipped, and says so.
 */
import type { Logger } from "../../shared/logger.js";
import { type Scope, tenantOfScope } from "../../shared/scope.js";
import { ServiceError } from "../../protocol/service-error.js";
import type { ReplayReport } from "../../sandbox/replay/replay-compare.js";
import { runRecordOf, scheduleReplay, type RunRecord } from "../../sandbox/replay/replay-runner.js";
import type { ReplayRecords } from "./replay-records.js";

type Replay = (record: RunRecord) => Promise<ReplayReport>;
/** Runs `work` in a check's turn for `tenant`; throws RESOURCE_EXHAUSTED when the class is full. */
type Schedule = (tenant: string, work: (replay: Replay) => Promise<void>) => Promise<void>;

export class ReplayCheck {
  /** Checks queued or running. */
  private pending = 0;
  private readonly idlers = new Set<() => void>();

  constructor(
    private readonly records: ReplayRecords,
    private readonly log: Logger,
    /** The replay queue (a fake one in tests). */
    private readonly schedule: Schedule = (tenant, work) => scheduleReplay({ priority: "check", key: tenant }, work),
  ) {}

  /** Resolves when every queued check is done, or after `budgetMs` (false: some were left). */
  async idle(budgetMs: number): Promise<boolean> {
    if (this.pending === 0) return true;
    let timer: NodeJS.Timeout | undefined;
    let settle: (() => void) | undefined;
    const out = new Promise<false>((r) => (timer = setTimeout(() => r(false), budgetMs)));
    const done = new Promise<true>((r) => {
      settle = () => r(true);
      this.idlers.add(settle);
    });
    try {
      return await Promise.race([done, out]);
    } finally {
      clearTimeout(timer);
      this.idlers.delete(settle!);
    }
  }

  /** Replays `codeModeRunId` in its turn. */
  finished(scope: Scope, codeModeRunId: string): void {
    let turn: Promise<void>;
    try {
      turn = this.schedule(tenantOfScope(scope), (replay) => this.check(scope, codeModeRunId, replay));
    } catch (err) {
      if (!(err instanceof ServiceError && err.code === "resource_exhausted")) throw err;
      this.log.info({ codeModeRunId, reason: err.message }, "replay check skipped: too many runs are waiting to be replayed");
      return;
    }
    this.pending++;
    void turn
      .catch((err: unknown) => this.log.warn({ err, codeModeRunId }, "replay check could not replay the run"))
      .finally(() => {
        if (--this.pending > 0) return;
        for (const settle of this.idlers) settle();
      });
  }

  private async check(scope: Scope, codeModeRunId: string, replay: Replay): Promise<void> {
    const segments = await this.records.segments(scope, codeModeRunId);
    if (segments.length === 0) return;
    const record = runRecordOf(codeModeRunId, segments);
    // Its start was dropped (its tenant's maxReplayBytes): nothing to check.
    if (record.segments[0]!.kind !== "exec") return;
    const report = await replay(record);
    const line = { codeModeRunId, agentRunId: scope.agentRunId, verdict: report.verdict, summary: report.summary, segments: segments.length };
    if (report.verdict === "diverged") this.log.warn(line, "replay check");
    else this.log.info(line, "replay check");
  }
}

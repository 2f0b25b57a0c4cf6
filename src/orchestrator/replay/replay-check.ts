/**
 * `--replay-check`: the orchestrator replays every code-mode run that finishes (its last
 * segment completed or failed) in the background, one at a time, and logs the verdict, a
 * divergence as a warning. For canarying a new build on real traffic, and for the test
 * suite, which runs with it on and fails on any divergence (docs/replay.md). Runs that
 * arrive while MAX_BACKLOG are waiting are skipped, and say so.
 */
import type { Logger } from "../../shared/logger.js";
import type { Scope } from "../../shared/scope.js";
import { replayRecord, runRecordOf } from "../../sandbox/replay/replay-runner.js";
import type { ReplayRecords } from "./replay-records.js";

const MAX_BACKLOG = 256;

export class ReplayCheck {
  private backlog = 0;
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly records: ReplayRecords,
    private readonly log: Logger,
  ) {}

  /** Resolves when every queued check is done, or after `budgetMs` (false: some were left). */
  async idle(budgetMs: number): Promise<boolean> {
    if (this.backlog === 0) return true;
    let timer: NodeJS.Timeout | undefined;
    const out = new Promise<false>((r) => (timer = setTimeout(() => r(false), budgetMs)));
    const done = (async () => {
      while (this.backlog > 0) await this.queue;
      return true as const;
    })();
    try {
      return await Promise.race([done, out]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Replays `codeModeRunId` once the checks before it are done. */
  finished(scope: Scope, codeModeRunId: string): void {
    if (this.backlog >= MAX_BACKLOG) {
      this.log.info({ codeModeRunId }, "replay check skipped: too many runs are waiting to be replayed");
      return;
    }
    this.backlog++;
    this.queue = this.queue.then(() => this.check(scope, codeModeRunId)).finally(() => this.backlog--);
  }

  private async check(scope: Scope, codeModeRunId: string): Promise<void> {
    try {
      const segments = await this.records.segments(scope, codeModeRunId);
      if (segments.length === 0) return;
      const report = await replayRecord(runRecordOf(codeModeRunId, segments));
      const line = { codeModeRunId, agentRunId: scope.agentRunId, verdict: report.verdict, summary: report.summary, segments: segments.length };
      if (report.verdict === "diverged") this.log.warn(line, "replay check");
      else this.log.info(line, "replay check");
    } catch (err) {
      this.log.warn({ err, codeModeRunId }, "replay check could not replay the run");
    }
  }
}

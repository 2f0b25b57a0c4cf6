/**
 * The thread replays run on (started by ./replay-runner.ts, one job at a time): each job re-runs a
 * recorded code-mode run's segments in order in fresh VMs, each from its tape, calling no
 * tool and no store. The exec starts as an exec starts (the same prepare and session start);
 * at a recorded suspension the VM is really snapshotted, and each wait restores that
 * snapshot, so snapshot and restore are replayed too. It posts one ReplayReport per job.
 */
import { parentPort, workerData } from "node:worker_threads";
import { BUILD } from "../../shared/build-info.js";
import type { SegmentRecord } from "../exec/replay-record.js";
import { LIMITS } from "../../shared/limits.js";
import type { TaskLimits, TaskOutcome } from "../pool/task-protocol.js";
import { TapePlayer } from "../worker/replay-tape.js";
import { prepareCell } from "../worker/prepare-cell.js";
import { runExecSession, runResumeSession } from "../worker/sessions.js";
import { compareSegment, summaryOf, type ReplayReport, type SegmentReport } from "./replay-compare.js";

/** `wasmDigest`: quickjs.wasm's sha256, so the build's precompiled preludes are run as a pool worker runs them (../worker/precompiled-preludes.ts). */
export type ReplayWorkerData = { wasmModule: WebAssembly.Module; wasmDigest: string };
/** One replay; `upTo`: a rebuild, which posts back the snapshot of the suspension stored as that generation. */
export type ReplayJob = { codeModeRunId: string; segments: SegmentRecord[]; upTo?: number };

/**
 * A record's limits within the config's clamps (a record given whole may say anything): a
 * replay never gets more memory, output or pending calls than a run could. No checkpoints.
 */
function clamped(limits: TaskLimits): TaskLimits {
  const clamp = (key: keyof typeof LIMITS & keyof TaskLimits) => {
    const { default: d, min, max } = LIMITS[key];
    const v = Number(limits?.[key]);
    return Number.isFinite(v) ? Math.min(Math.max(v, min), max) : d;
  };
  return {
    timeoutMs: clamp("timeoutMs"),
    memoryLimitBytes: clamp("memoryLimitBytes"),
    maxOutputBytes: clamp("maxOutputBytes"),
    maxPendingToolCalls: clamp("maxPendingToolCalls"),
    maxSnapshotBytes: clamp("maxSnapshotBytes"),
  };
}

async function replaySegment(
  seg: SegmentRecord,
  previous: TaskOutcome | undefined,
  wasm: WebAssembly.Module,
  player: TapePlayer,
): Promise<TaskOutcome | string> {
  const { port1, port2 } = new MessageChannel();
  try {
    if (seg.kind === "exec") {
      const e = seg.exec;
      if (!e) return "the exec's record has no program";
      const task = {
        kind: "exec" as const,
        port: port1,
        source: e.source,
        language: e.language as "javascript" | "typescript",
        limits: clamped(seg.limits),
        catalog: { staticJson: e.staticJson, allToolsJson: seg.allToolsJson, convenienceJson: seg.convenienceJson, needsContext: e.needsContext },
        contextJson: e.contextJson,
        outputBytesUsed: seg.outputBytesUsed,
        ...(e.surface ? { surface: e.surface } : {}),
        ...(e.sessionStore === false ? { sessionStore: false as const } : {}),
        replay: player,
      };
      const prepared = await prepareCell(task, wasm);
      return prepared.ok ? await runExecSession(task, wasm, prepared.source) : prepared.outcome;
    }
    if (previous?.status !== "suspended") return "the wait has no suspended segment before it to resume";
    return await runResumeSession(
      {
        kind: "resume",
        port: port1,
        envelope: previous.envelope,
        pending: previous.pending,
        answers: [],
        allToolsJson: seg.allToolsJson,
        convenienceJson: seg.convenienceJson,
        limits: clamped(seg.limits),
        outputBytesUsed: seg.outputBytesUsed,
        replay: player,
      } as Parameters<typeof runResumeSession>[0],
      wasm,
    );
  } finally {
    port1.close();
    port2.close();
  }
}

async function replay(data: ReplayJob, wasmModule: WebAssembly.Module): Promise<{ report: ReplayReport; rebuilt?: TaskOutcome }> {
  const segments: SegmentReport[] = [];
  /** The replayed suspensions by the store generation they were stored as: each wait resumes the one it resumed. */
  const suspended = new Map<number, TaskOutcome>();
  let stopped = false;
  for (const [index, seg] of data.segments.entries()) {
    const previous = suspended.get(seg.from ?? 0);
    const report: SegmentReport = { index, kind: seg.kind, verdict: "not run", calls: 0 };
    segments.push(report);
    if (stopped) continue;
    const player = new TapePlayer(seg.tape);
    const outcome = await replaySegment(seg, previous, wasmModule, player);
    report.calls = player.calls;
    if (typeof outcome === "string") {
      Object.assign(report, { verdict: "incomplete", incomplete: outcome });
    } else if (player.divergence) {
      Object.assign(report, { verdict: "diverged", divergence: player.divergence });
    } else if (player.incomplete) {
      Object.assign(report, { verdict: "incomplete", incomplete: player.incomplete });
    } else {
      const divergence = compareSegment(seg, outcome, player.outputs);
      Object.assign(report, divergence ? { verdict: "diverged", divergence } : { verdict: "same" });
    }
    stopped = report.verdict !== "same";
    if (typeof outcome !== "string" && outcome.status === "suspended") suspended.set(seg.to ?? (seg.from ?? 0) + 1, outcome);
  }
  const bad = segments.find((s) => s.verdict === "diverged" || s.verdict === "incomplete");
  const partial: Omit<ReplayReport, "summary"> = {
    verdict: bad ? (bad.verdict as "diverged" | "incomplete") : "same",
    build: { recorded: data.segments[0]?.build, replayed: BUILD },
    codeModeRunId: data.codeModeRunId,
    segments,
  };
  const report = { ...partial, summary: summaryOf(partial) };
  const rebuilt = data.upTo !== undefined && report.verdict === "same" ? suspended.get(data.upTo) : undefined;
  return { report, ...(rebuilt ? { rebuilt } : {}) };
}

const { wasmModule } = workerData as ReplayWorkerData;
// One job at a time (the runner queues them); the thread stays for the next.
parentPort!.on("message", (job: ReplayJob) => {
  replay(job, wasmModule).then(
    ({ report, rebuilt }) => {
      if (rebuilt?.status !== "suspended") return parentPort!.postMessage({ ok: true, report });
      const { envelope, pending } = rebuilt;
      parentPort!.postMessage({ ok: true, report, rebuilt: { envelope, pending } }, [envelope.buffer as ArrayBuffer]);
    },
    (err: unknown) => parentPort!.postMessage({ ok: false, error: (err as Error).message }),
  );
});

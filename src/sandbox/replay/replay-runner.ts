/**
 * Runs a replay (docs/replay.md) for the orchestrator's Control.ReplayRun and `--replay-check`,
 * for `codemode replay --from` and for a sidecar's upgrade rebuilds: checks a run record's
 * shape, then re-runs it on a worker thread of its own (./replay-worker.ts, kept between
 * replays) with a heap cap and a wall-clock bound, and returns the report. Replays take that
 * one thread in turn through a fair queue (ReplayQueue): rebuilds first, then requests, then
 * checks, round-robin between tenants within each, with bounded waiting lines; a replay of a
 * higher class preempts a lower one once (docs/replay.md#the-replay-queue, and why one thread).
 * Guest code runs in the same QuickJS-WASI sandbox as an exec; nothing it does reaches a tool,
 * a store or the network.
 */
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { Worker } from "node:worker_threads";
import { ServiceError } from "../../protocol/service-error.js";
import { RECORD_VERSION, type SegmentRecord } from "../exec/replay-record.js";
import type { PendingRef } from "../pool/task-protocol.js";
import type { ReplayReport } from "./replay-compare.js";
import type { ReplayJob, ReplayWorkerData } from "./replay-worker.js";

/** A code-mode run's record: its segments' records in order (Control.GetReplayRecord, `codemode replay --export`). */
export type RunRecord = { v: typeof RECORD_VERSION; codeModeRunId: string; segments: SegmentRecord[] };

/** The longest a replay may take before it is stopped and reported incomplete. */
export const REPLAY_TIMEOUT_MS = 5 * 60_000;
/** The replay thread's V8 heap cap (guest memory is QuickJS's own, within the run's limit). */
const REPLAY_HEAP_MB = 512;

/**
 * A run's record from its segments' records as stored: in the order they ran (the exec, then
 * each wait by the generation it resumed, then when it started), whatever order they arrived in.
 */
export function runRecordOf(codeModeRunId: string, segmentJsons: readonly string[]): RunRecord {
  const segments = segmentJsons.map((s) => JSON.parse(s) as SegmentRecord);
  const rank = (s: SegmentRecord) => (s.kind === "exec" ? -1 : (s.from ?? 0));
  segments.sort((a, b) => rank(a) - rank(b) || a.startedAtMs - b.startedAtMs);
  return { v: RECORD_VERSION, codeModeRunId, segments };
}

/** A record given whole (a file, a request), checked before anything runs it. */
export function parseRunRecord(json: string): RunRecord {
  let r: Partial<RunRecord>;
  try {
    r = JSON.parse(json) as Partial<RunRecord>;
  } catch (err) {
    throw new ServiceError("invalid_argument", `the replay record is not JSON: ${(err as Error).message}`);
  }
  if (r?.v !== RECORD_VERSION) throw new ServiceError("invalid_argument", `the replay record's version must be ${RECORD_VERSION}, got ${JSON.stringify(r?.v)}`);
  if (typeof r.codeModeRunId !== "string" || !Array.isArray(r.segments) || r.segments.length === 0) {
    throw new ServiceError("invalid_argument", "the replay record must name its codeModeRunId and hold at least one segment");
  }
  for (const [i, s] of r.segments.entries()) {
    const why = segmentProblem(s);
    if (why) throw new ServiceError("invalid_argument", `the replay record's segment ${i + 1} is not a segment record: ${why}`);
    if (i === 0 && s.kind !== "exec") throw new ServiceError("invalid_argument", "a replay record starts with its exec");
  }
  return r as RunRecord;
}

/** quickjs.wasm compiled once per process, and its sha256 (which selects the build's precompiled preludes, as a pool worker's does). */
/** What is wrong with a segment record given whole, or undefined: checked before a replay thread sees it. */
function segmentProblem(s: SegmentRecord | undefined): string | undefined {
  const isObject = (v: unknown) => typeof v === "object" && v !== null && !Array.isArray(v);
  const strings = (v: unknown) => Array.isArray(v) && v.every((x) => typeof x === "string");
  if (!isObject(s)) return "not an object";
  if (s!.kind !== "exec" && s!.kind !== "wait") return 'its kind must be "exec" or "wait"';
  const t = s!.tape as Partial<SegmentRecord["tape"]> | undefined;
  if (!isObject(t)) return "it has no tape";
  if (!Array.isArray(t!.clock) || !t!.clock.every((n) => Number.isFinite(n))) return "its tape's clock must be numbers";
  if (!strings(t!.seeds) || !strings(t!.ids)) return "its tape's seeds and ids must be texts";
  if (!Array.isArray(t!.events) || !Array.isArray(t!.sent)) return "its tape's events and sent must be lists";
  if (!isObject(s!.limits) || !isObject(s!.outcome) || !isObject(s!.result)) return "it needs limits, outcome and result";
  if (!Array.isArray(s!.result.priorOutputs) || typeof s!.result.modelJson !== "string" || !isObject(s!.result.input) || !isObject(s!.result.telemetry))
    return "its result needs input, telemetry, priorOutputs and modelJson";
  if (s!.kind === "exec") {
    const e = s!.exec;
    if (!isObject(e) || typeof e!.source !== "string" || typeof e!.staticJson !== "string" || typeof e!.contextJson !== "string")
      return "its exec needs source, staticJson and contextJson";
  }
  return undefined;
}

let wasm: Promise<{ module: WebAssembly.Module; digest: string }> | undefined;

/** Who a replay is for, in the order they are served: a rebuild holds a gateway's `wait`. */
export type ReplayPriority = "rebuild" | "request" | "check";
const RANK: Record<ReplayPriority, number> = { rebuild: 0, request: 1, check: 2 };

/** Replays a class lets wait (the running one aside), per key (a tenant) and in all; undefined: unbounded. */
export type ReplayQueueBounds = Record<ReplayPriority, { perKey: number; total: number } | undefined>;

export const REPLAY_QUEUE_BOUNDS: ReplayQueueBounds = {
  // Refusing a rebuild would fail the run it rebuilds; the sidecar's waits in flight bound them.
  rebuild: undefined,
  // Control.ReplayRun and `codemode replay --from`: a flood is refused, RESOURCE_EXHAUSTED.
  request: { perKey: 16, total: 64 },
  // --replay-check: a finished run that finds no room is not checked, and the check says so.
  check: { perKey: 64, total: 256 },
};

/** While checks wait, every CHECK_EVERY-th replay picked is one, so requests cannot starve them. */
const CHECK_EVERY = 8;

type QueuedJob = {
  priority: ReplayPriority;
  key: string;
  /** Runs the replay; rejects soon after `signal` aborts (a preemption). */
  work: (signal: AbortSignal) => Promise<unknown>;
  resolve: (value: unknown) => void;
  reject: (err: unknown) => void;
  /** Times it was preempted: at most once, so a stream of higher replays cannot starve it. */
  preempted: number;
};

/**
 * The order replays take the one replay thread in. Strict priority between classes, except
 * that while checks wait one pick in CHECK_EVERY is a check. Within a class, the key (tenant)
 * served least recently goes first, so one tenant's many replays wait behind each other, not
 * in front of another tenant's. A replay of a higher class arriving while one of a lower class
 * runs preempts it (`work`'s signal aborts; the runner then ends the thread, which keeps no
 * state between replays), and the preempted one goes back to the head of its class, not to be
 * preempted again. Exported for its unit test, which drives it with fake replays.
 */
export class ReplayQueue {
  private readonly waiting: Record<ReplayPriority, Map<string, QueuedJob[]>> = { rebuild: new Map(), request: new Map(), check: new Map() };
  private readonly counts: Record<ReplayPriority, number> = { rebuild: 0, request: 0, check: 0 };
  /** Per class, when each key was last served (a sequence number; keys are tenants, bounded by the tenants file). */
  private readonly served: Record<ReplayPriority, Map<string, number>> = { rebuild: new Map(), request: new Map(), check: new Map() };
  private seq = 0;
  private picksSinceCheck = 0;
  private running: { job: QueuedJob; controller: AbortController } | undefined;

  constructor(private readonly bounds: ReplayQueueBounds = REPLAY_QUEUE_BOUNDS) {}

  /**
   * Runs `work` in its turn. Throws RESOURCE_EXHAUSTED at once (synchronously) when the class
   * has no room for `key`. `work` is given a signal that aborts when a higher replay preempts
   * it: it must then reject, and is run again, from the start, in its next turn.
   */
  submit<T>(priority: ReplayPriority, key: string, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const bound = this.bounds[priority];
    if (bound) {
      const mine = this.waiting[priority].get(key)?.length ?? 0;
      if (mine >= bound.perKey)
        throw new ServiceError(
          "resource_exhausted",
          `too many replays are waiting on this process: ${mine} for ${keyName(key)} (at most ${bound.perKey} each); retry once one of them has finished`,
        );
      if (this.counts[priority] >= bound.total)
        throw new ServiceError(
          "resource_exhausted",
          `too many replays are waiting on this process: ${this.counts[priority]} (at most ${bound.total}); retry once one of them has finished`,
        );
    }
    return new Promise<T>((resolve, reject) => {
      const job: QueuedJob = { priority, key, work, resolve: resolve as (v: unknown) => void, reject, preempted: 0 };
      this.enqueue(job, false);
      const now = this.running;
      if (now && RANK[priority] < RANK[now.job.priority] && now.job.preempted === 0) now.controller.abort();
      this.pump();
    });
  }

  /** What runs and what waits (tests, logs). */
  get state(): { running?: { priority: ReplayPriority; key: string }; waiting: Record<ReplayPriority, number> } {
    const r = this.running?.job;
    return { ...(r ? { running: { priority: r.priority, key: r.key } } : {}), waiting: { ...this.counts } };
  }

  private enqueue(job: QueuedJob, atHead: boolean): void {
    const queues = this.waiting[job.priority];
    const jobs = queues.get(job.key) ?? [];
    if (atHead) {
      jobs.unshift(job);
      // A preempted replay is the next of its class: its key counts as never served.
      this.served[job.priority].set(job.key, Number.NEGATIVE_INFINITY);
    } else jobs.push(job);
    queues.set(job.key, jobs);
    this.counts[job.priority]++;
  }

  private pick(): QueuedJob | undefined {
    const has = (p: ReplayPriority) => this.counts[p] > 0;
    let priority: ReplayPriority | undefined;
    if (has("rebuild")) priority = "rebuild";
    else if (has("check") && (!has("request") || this.picksSinceCheck >= CHECK_EVERY - 1)) priority = "check";
    else if (has("request")) priority = "request";
    if (priority === undefined) return undefined;
    if (priority === "check") this.picksSinceCheck = 0;
    else if (priority === "request" && has("check")) this.picksSinceCheck++;
    const queues = this.waiting[priority];
    const served = this.served[priority];
    let key: string | undefined;
    for (const k of queues.keys()) if (key === undefined || (served.get(k) ?? -1) < (served.get(key) ?? -1)) key = k;
    const jobs = queues.get(key!)!;
    const job = jobs.shift()!;
    if (jobs.length === 0) queues.delete(key!);
    this.counts[priority]--;
    served.set(key!, this.seq++);
    return job;
  }

  private pump(): void {
    if (this.running) return;
    const job = this.pick();
    if (!job) return;
    const controller = new AbortController();
    this.running = { job, controller };
    const done = () => {
      this.running = undefined;
      this.pump();
    };
    Promise.resolve()
      .then(() => job.work(controller.signal))
      .then(
        (value) => {
          job.resolve(value);
          done();
        },
        (err: unknown) => {
          if (controller.signal.aborted) {
            job.preempted++;
            this.enqueue(job, true);
          } else job.reject(err);
          done();
        },
      );
  }
}

function keyName(key: string): string {
  return key === LOCAL_KEY ? "this process" : `tenant ${JSON.stringify(key)}`;
}

/** The key of a replay asked for in this process itself (`codemode replay --from`). */
const LOCAL_KEY = "";

/** Every replay of this process, on its one replay thread. */
const queue = new ReplayQueue();

/** How a replay is queued: its class (a request by default) and its key, the tenant it is for. */
export type ReplayOptions = { priority?: "request" | "check"; key?: string; timeoutMs?: number };

/**
 * Runs `work` in a replay's turn (RESOURCE_EXHAUSTED, thrown at once, when there is no room);
 * `replay` re-runs a record on the replay thread. For work that reads the record itself, in
 * its turn (`--replay-check`); preempted, `work` runs again from the start.
 */
export function scheduleReplay<T>(options: ReplayOptions, work: (replay: (record: RunRecord) => Promise<ReplayReport>) => Promise<T>): Promise<T> {
  const timeoutMs = options.timeoutMs ?? REPLAY_TIMEOUT_MS;
  return queue.submit(options.priority ?? "request", options.key ?? LOCAL_KEY, (signal) =>
    work(async (record) => (await runOnce(record, undefined, timeoutMs, signal)).report),
  );
}

/** Re-runs `record` in its turn and reports how it compares. */
export async function replayRecord(record: RunRecord, options: ReplayOptions = {}): Promise<ReplayReport> {
  return scheduleReplay(options, (replay) => replay(record));
}

/**
 * Rebuilds, on this build, the VM a run left when it suspended as store generation
 * `generation`: replays the segments that led to it and, when they all replay the same,
 * returns that suspension's snapshot envelope (unsealed) and what it awaits. Served before
 * every other replay, in the order asked (the tenant of the run is not known here).
 */
export async function rebuildSuspension(
  record: RunRecord,
  generation: number,
  timeoutMs = REPLAY_TIMEOUT_MS,
): Promise<{ report: ReplayReport; rebuilt?: { envelope: Uint8Array; pending: PendingRef[] } }> {
  const chain = { ...record, segments: record.segments.filter((s) => (s.kind === "exec" ? 0 : (s.from ?? 0)) < generation) };
  return queue.submit("rebuild", LOCAL_KEY, (signal) => runOnce(chain, generation, timeoutMs, signal));
}

type ReplayResult = { report: ReplayReport; rebuilt?: { envelope: Uint8Array; pending: PendingRef[] } };

/** The replay thread, kept between replays; a new one after a timeout or a failure. */
let thread: Worker | undefined;

async function replayThread(): Promise<Worker> {
  if (thread) return thread;
  wasm ??= readFile(new URL(import.meta.resolve("quickjs-wasi/quickjs.wasm"))).then(async (b) => ({
    module: await WebAssembly.compile(b),
    digest: createHash("sha256").update(b).digest("hex"),
  }));
  const { module, digest } = await wasm;
  const data: ReplayWorkerData = { wasmModule: module, wasmDigest: digest };
  const worker = new Worker(new URL("./replay-worker.js", import.meta.url), { workerData: data, resourceLimits: { maxOldGenerationSizeMb: REPLAY_HEAP_MB } });
  // An idle replay thread does not keep the process alive.
  worker.unref();
  worker.once("exit", () => {
    if (thread === worker) thread = undefined;
  });
  thread = worker;
  return worker;
}

/** A replay preempted by a higher one (its thread is ended; the queue runs it again). */
class Preempted extends Error {}

async function runOnce(record: RunRecord, upTo: number | undefined, timeoutMs: number, signal?: AbortSignal): Promise<ReplayResult> {
  if (signal?.aborted) throw new Preempted("the replay was preempted");
  const worker = await replayThread();
  if (signal?.aborted) throw new Preempted("the replay was preempted");
  const job: ReplayJob = { codeModeRunId: record.codeModeRunId, segments: record.segments, ...(upTo !== undefined ? { upTo } : {}) };
  return new Promise<ReplayResult>((resolve, reject) => {
    const discard = () => {
      if (thread === worker) thread = undefined;
      void worker.terminate();
    };
    /** Ends the thread, then settles: the next replay starts once it is gone (one replay thread at a time). */
    const endThen = (err: Error) => {
      if (thread === worker) thread = undefined;
      const settle = () => reject(err);
      worker.terminate().then(settle, settle);
    };
    const timer = setTimeout(() => {
      off();
      endThen(new ServiceError("resource_exhausted", `the replay ran longer than ${timeoutMs} ms and was stopped`));
    }, timeoutMs);
    const onMessage = (m: ({ ok: true } & ReplayResult) | { ok: false; error: string }) => {
      off();
      if (m.ok) resolve({ report: m.report, ...(m.rebuilt ? { rebuilt: m.rebuilt } : {}) });
      else {
        discard();
        reject(new ServiceError("internal", `the replay failed: ${m.error}`));
      }
    };
    const onError = (err: Error) => {
      off();
      discard();
      reject(new ServiceError("internal", `the replay's thread failed: ${err.message}`));
    };
    const onExit = (code: number) => {
      off();
      reject(new ServiceError("internal", `the replay's thread exited (${code}) before reporting`));
    };
    const onPreempt = () => {
      off();
      endThen(new Preempted("the replay was preempted"));
    };
    const off = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onPreempt);
      worker.off("message", onMessage);
      worker.off("error", onError);
      worker.off("exit", onExit);
    };
    worker.on("message", onMessage);
    worker.on("error", onError);
    worker.on("exit", onExit);
    signal?.addEventListener("abort", onPreempt, { once: true });
    worker.postMessage(job);
  });
}

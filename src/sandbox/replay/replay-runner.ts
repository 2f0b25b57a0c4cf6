/**
 * Runs a replay (docs/replay.md) for the orchestrator's Control.ReplayRun and for
 * `codemode replay --from`: checks a run record's shape, then re-runs it on a worker thread
 * of its own (./replay-worker.ts, kept between replays) with a heap cap and a wall-clock
 * bound, one replay at a time per process, and returns the report. Guest code runs in the same QuickJS-WASI
 * sandbox as an exec; nothing it does reaches a tool, a store or the network.
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
let queue: Promise<unknown> = Promise.resolve();

/** Re-runs `record` and reports how it compares; replays run one after another. */
export async function replayRecord(record: RunRecord, timeoutMs = REPLAY_TIMEOUT_MS): Promise<ReplayReport> {
  return (await queued(record, undefined, timeoutMs)).report;
}

/**
 * Rebuilds, on this build, the VM a run left when it suspended as store generation
 * `generation`: replays the segments that led to it and, when they all replay the same,
 * returns that suspension's snapshot envelope (unsealed) and what it awaits.
 */
export async function rebuildSuspension(
  record: RunRecord,
  generation: number,
  timeoutMs = REPLAY_TIMEOUT_MS,
): Promise<{ report: ReplayReport; rebuilt?: { envelope: Uint8Array; pending: PendingRef[] } }> {
  const chain = { ...record, segments: record.segments.filter((s) => (s.kind === "exec" ? 0 : (s.from ?? 0)) < generation) };
  return queued(chain, generation, timeoutMs);
}

function queued(record: RunRecord, upTo: number | undefined, timeoutMs: number): Promise<ReplayResult> {
  const run = queue.then(() => runOnce(record, upTo, timeoutMs));
  queue = run.catch(() => undefined);
  return run;
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

async function runOnce(record: RunRecord, upTo: number | undefined, timeoutMs: number): Promise<ReplayResult> {
  const worker = await replayThread();
  const job: ReplayJob = { codeModeRunId: record.codeModeRunId, segments: record.segments, ...(upTo !== undefined ? { upTo } : {}) };
  return new Promise<ReplayResult>((resolve, reject) => {
    const discard = () => {
      if (thread === worker) thread = undefined;
      void worker.terminate();
    };
    const timer = setTimeout(() => {
      off();
      discard();
      reject(new ServiceError("resource_exhausted", `the replay ran longer than ${timeoutMs} ms and was stopped`));
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
    const off = () => {
      clearTimeout(timer);
      worker.off("message", onMessage);
      worker.off("error", onError);
      worker.off("exit", onExit);
    };
    worker.on("message", onMessage);
    worker.on("error", onError);
    worker.on("exit", onExit);
    worker.postMessage(job);
  });
}

/**
 * The pool's worker threads as lanes (base, surge, background: LaneKind), one single-thread
 * piscina per thread, so the pool, not piscina, decides which thread a task goes to.
 *
 * A guest that computes holds its thread: every VM co-hosted there waits until it yields,
 * ends or is killed. So each lane's worker publishes in shared memory since when a VM has
 * held its thread; a lane held longer than HOG_MS is *hogged*: the fair queue
 * (./scheduler.ts) sends new tasks elsewhere, and a task posted there but not started is
 * withdrawn (./pool-task.ts; the claim word decides, without a race). Heavy sessions run
 * only on background lanes, whose threads run at BACKGROUND_NICE (../worker/priority.ts);
 * surge lanes are added while light lanes are held or full; idle surge and background lanes
 * are retired. A lane whose thread is new stays *warming* until the warm-up probes ran
 * there (./lane-warmup.ts), or while ./pool-health.ts retries it. A *deferred* base lane
 * starts its thread for its first task or at `startDeferred` (docs/module-notes.md#srcsandboxpoollanests).
 */
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { availableParallelism } from "node:os";
import { fileURLToPath } from "node:url";
import { Piscina } from "piscina";
import { codeCacheRefreshMs, launchState } from "../../shared/launch-state.js";
import type { WorkerMemory } from "./task-protocol.js";

/** How long a VM may hold its thread before the lane counts as hogged. */
export const HOG_MS = 50;
/**
 * The nice value of a background lane's thread (../worker/priority.ts): under contention
 * the kernel gives a nice-10 thread about a tenth of what a nice-0 one gets.
 */
export const BACKGROUND_NICE = 10;

/** base: one per thread asked for, always there; surge: added for light work while loops hold lanes; background: heavy sessions' lanes, at a lower OS priority. */
export type LaneKind = "base" | "surge" | "background";

/**
 * A pool thread's V8 young generation, MiB (its two semi-spaces take two thirds of it).
 * V8's default lets each semi-space grow to 16 MiB when much of what a thread allocates
 * survives a scavenge, and keeps it there: in the hostile-mix soak a long-lived worker's
 * new space sat at 32 MiB against 6-10 MiB of old space, so the workers' heaps (and the
 * sidecar's RSS) ratcheted up with the load. A worker's own allocations are small and
 * short-lived (messages, strings crossing the bridge; guest objects live in QuickJS's
 * memory), so 4 MiB semi-spaces cost a few more scavenges and no promotions that matter.
 */
export const WORKER_YOUNG_GENERATION_MB = 12;

/**
 * How worker threads load (../../shared/bundle-runner.ts): the worker bundle's entry when the
 * CLI runs from its bundle, else the module; the code cache's training and V8 flags' digest.
 */
export function workerLoading(): Pick<LaneOptions, "filename" | "trainCodeCache" | "codeCache"> {
  const launched = launchState();
  const entry = fileURLToPath(new URL("../../bundle/worker-entry.cjs", import.meta.url));
  return {
    filename: launched.bundle === "used" && existsSync(entry) ? entry : fileURLToPath(new URL("../worker/worker.js", import.meta.url)),
    trainCodeCache: launched.training,
    codeCache: { flavour: launched.flavour, refreshMs: codeCacheRefreshMs() },
  };
}

/** Large enough that parser and JSON nesting limits trip inside QuickJS first. */
const WORKER_STACK_MB = 16;

/**
 * The base lanes of a sandbox pool: `threads` (default: the machine's parallelism) worker
 * threads sharing one compiled quickjs-wasi module, each taking `execsPerWorker` (default 8)
 * tasks at once.
 */
export async function poolLanes(options: {
  threads?: number;
  execsPerWorker?: number;
  startThreads?: number;
}): Promise<{ lanes: Lanes; threads: number; execsPerWorker: number }> {
  const bytes = await readFile(new URL(import.meta.resolve("quickjs-wasi/quickjs.wasm")));
  const wasmModule = await WebAssembly.compile(bytes);
  const threads = Math.max(1, options.threads ?? availableParallelism());
  const execsPerWorker = Math.max(1, options.execsPerWorker ?? 8);
  // The digest keys the build's prelude bytecode (../worker/precompiled-preludes.ts).
  const lanes = new Lanes(
    threads,
    {
      ...workerLoading(),
      execsPerWorker,
      wasmModule,
      wasmDigest: createHash("sha256").update(bytes).digest("hex"),
      stackSizeMb: WORKER_STACK_MB,
    },
    Math.max(1, Math.min(threads, options.startThreads ?? threads)),
  );
  return { lanes, threads, execsPerWorker };
}

export type LaneOptions = {
  filename: string;
  execsPerWorker: number;
  wasmModule: WebAssembly.Module;
  /** quickjs.wasm's sha256 (hex): a worker takes the build's prelude bytecode only for the same wasm. */
  wasmDigest?: string;
  stackSizeMb: number;
  /** A code cache training start (../../shared/launch-state.ts): the worker bundle writes its cache after each task. */
  trainCodeCache?: boolean;
  /** The main thread's V8 flags' digest, and when a worker whose cache was refused writes one (../../shared/bundle-runner.ts). */
  codeCache?: { flavour: string; refreshMs: number };
};

export class Lane {
  readonly piscina: Piscina;
  /** [0]: ms since `epoch` (plus 1) when a VM took this lane's thread, 0 while none holds it; [1]: the holding task's id. */
  private readonly busy: Int32Array;
  /** The session of each task on this lane, by task id. */
  private readonly holders = new Map<number, string>();
  /** When each task on this lane was placed there (performance.now()), by task id, oldest first. */
  private readonly placedAt = new Map<number, number>();
  private readonly epoch = Date.now();
  /** Tasks posted to this lane and not yet finished (or withdrawn). */
  active = 0;
  /** Its thread is new and the warm-up probes have not finished (see the header). */
  warming = false;
  /** Its thread cannot run code (./pool-health.ts retries it): the fair queue sends it nothing. */
  down = false;
  /** A base lane whose thread starts for its first task, or warms up at `Lanes.startDeferred`. */
  deferred: boolean;
  /** Settles when the thread this lane last terminated has exited: a warm-up posts its probes then (before, piscina gave them to the dying thread). */
  replaced: Promise<unknown> = Promise.resolve();
  /** Those tasks by session (tenant, ./cpu-budget.ts). */
  readonly tenants = new Map<string, number>();
  /** Its thread's memory, as last reported with a task's outcome (none since the thread started: undefined). */
  memory: WorkerMemory | undefined;

  enter(tenant: string, taskId: number): void {
    this.holders.set(taskId, tenant);
    this.placedAt.set(taskId, performance.now());
    this.active++;
    this.tenants.set(tenant, (this.tenants.get(tenant) ?? 0) + 1);
  }

  leave(tenant: string, taskId: number): void {
    this.holders.delete(taskId);
    this.placedAt.delete(taskId);
    this.active--;
    const n = (this.tenants.get(tenant) ?? 1) - 1;
    if (n > 0) this.tenants.set(tenant, n);
    else this.tenants.delete(tenant);
  }

  constructor(
    readonly index: number,
    o: LaneOptions,
    readonly kind: LaneKind = "base",
    deferred = false,
  ) {
    const shared = new SharedArrayBuffer(8);
    this.busy = new Int32Array(shared);
    // The fair queue sees an idle lane: the first task placed there starts its thread.
    this.deferred = deferred;
    this.piscina = new Piscina({
      filename: o.filename,
      minThreads: deferred ? 0 : 1,
      maxThreads: 1,
      // Never retired for idleness: piscina sets no idle timer for Infinity (a deferred lane
      // has minThreads 0; Number.MAX_SAFE_INTEGER overflowed Node's timers to 1 ms).
      idleTimeout: Number.POSITIVE_INFINITY,
      concurrentTasksPerWorker: o.execsPerWorker,
      workerData: {
        wasmModule: o.wasmModule,
        wasmDigest: o.wasmDigest,
        busy: shared,
        epoch: this.epoch,
        nice: kind === "background" ? BACKGROUND_NICE : 0,
        trainCodeCache: o.trainCodeCache === true,
        codeCacheFlavour: o.codeCache?.flavour ?? "",
        codeCacheRefreshMs: o.codeCache?.refreshMs,
      },
      resourceLimits: { stackSizeMb: o.stackSizeMb, maxYoungGenerationSizeMb: WORKER_YOUNG_GENERATION_MB },
      // Guest code runs in workers; keep the process's environment out of them.
      env: {},
      atomics: "disabled",
    });
  }

  /** Milliseconds since the oldest task now on this lane was placed (0 when none is). */
  oldestTaskMs(now = performance.now()): number {
    for (const at of this.placedAt.values()) return now - at;
    return 0;
  }

  /** Milliseconds the VM now on this lane's thread has held it (0 when none does). */
  heldMs(now = Date.now()): number {
    const since = Atomics.load(this.busy, 0);
    return since === 0 ? 0 : Math.max(0, now - this.epoch - (since - 1));
  }

  /** A VM has held the thread past the slice (a lane with no task of ours cannot be: a stale mark after a kill). */
  get hogged(): boolean {
    return this.active > 0 && this.heldMs() > HOG_MS;
  }

  /** The id of the task whose VM holds this lane's thread now, or 0. */
  holder(): number {
    return Atomics.load(this.busy, 0) === 0 ? 0 : Atomics.load(this.busy, 1);
  }

  /** The session whose guest holds this lane's thread past the slice, if any. */
  get hogger(): string | undefined {
    return this.hogged ? this.holders.get(Atomics.load(this.busy, 1)) : undefined;
  }

  /** Forgets the mark of a thread that was terminated. */
  clearHold(): void {
    Atomics.store(this.busy, 0, 0);
  }
}

/** How long a surge or background lane stays without a task before it is retired (loops tend to come back; a cold thread costs a prelude compile). */
const SURGE_IDLE_MS = 30_000;

export class Lanes {
  readonly all: Lane[];
  /** Lanes that are always there (one per thread asked for), first in `all`; the rest are surge and background lanes. */
  readonly base: number;
  /** Background lanes at most: one per half of the base lanes (heavy sessions keep to that share). */
  readonly maxBackground: number;
  private nextIndex: number;
  private readonly errorHandlers: Array<(err: unknown, lane: Lane) => void> = [];
  private readonly idleSince = new Map<Lane, number>();
  private readonly retireTimer: NodeJS.Timeout;

  /** `startNow`: base lanes whose threads start at once; the others are deferred (`startDeferred`). */
  constructor(
    threads: number,
    private readonly options: LaneOptions,
    startNow = threads,
  ) {
    this.all = Array.from({ length: threads }, (_, i) => new Lane(i, options, "base", i >= startNow));
    this.base = threads;
    this.maxBackground = Math.max(1, Math.floor(threads / 2));
    this.nextIndex = threads;
    this.retireTimer = setInterval(() => this.retireIdle(), 1_000);
    this.retireTimer.unref();
  }

  /** Adds a surge lane, unless the pool already has one per base lane; returns it. */
  surge(): Lane | undefined {
    if (this.surges >= this.base) return undefined;
    return this.add("surge");
  }

  /** Adds a background lane (its thread niced), unless the pool has `maxBackground`; returns it. */
  background(): Lane | undefined {
    if (this.count("background") >= this.maxBackground) return undefined;
    return this.add("background");
  }

  private add(kind: LaneKind): Lane {
    const lane = new Lane(this.nextIndex++, this.options, kind);
    for (const fn of this.errorHandlers) lane.piscina.on("error", (err: unknown) => fn(err, lane));
    this.all.push(lane);
    this.onAdd?.(lane);
    this.warm(lane);
    return lane;
  }

  private count(kind: LaneKind): number {
    let n = 0;
    for (const l of this.all) if (l.kind === kind) n++;
    return n;
  }

  /** Told of each surge or background lane as it is added. */
  onAdd: ((lane: Lane) => void) | undefined;
  /** Warms a lane whose thread is new; calls `done` when the lane may take work. */
  onWarm: ((lane: Lane, done: () => void) => void) | undefined;
  /** Told when a warming lane may take work again. */
  onWarmed: (() => void) | undefined;

  /** Base lanes started now (not deferred). */
  get started(): number {
    let n = 0;
    for (const l of this.all) if (!l.deferred) n++;
    return n;
  }

  /**
   * Warms up the deferred base lanes no task has started (each starts its thread). One a task
   * started needs none: that task compiled the prelude, and probes queued behind a run that
   * awaits its tools would not start in time (the lane would count as down).
   */
  startDeferred(): void {
    for (const lane of this.all) {
      if (!lane.deferred) continue;
      lane.deferred = false;
      if (lane.piscina.threads.length === 0 && lane.active === 0) this.warm(lane);
    }
  }

  /** Starts a lane's warm-up unless one runs (also ./pool-health.ts, for a lane that lost its thread). */
  warm(lane: Lane): void {
    if (!this.onWarm || lane.warming) return;
    lane.warming = true;
    this.onWarm(lane, () => {
      lane.warming = false;
      this.onWarmed?.();
    });
  }

  /** Surge lanes now: threads beyond one per core for light work. */
  get surges(): number {
    return this.count("surge");
  }

  /** Background lanes now: the heavy sessions' threads. */
  get backgrounds(): number {
    return this.count("background");
  }

  private retireIdle(now = Date.now()): void {
    for (const lane of this.all.slice(this.base)) {
      if (lane.active > 0) {
        this.idleSince.delete(lane);
        continue;
      }
      const since = this.idleSince.get(lane) ?? now;
      this.idleSince.set(lane, since);
      if (now - since < SURGE_IDLE_MS) continue;
      this.idleSince.delete(lane);
      this.all.splice(this.all.indexOf(lane), 1);
      void lane.piscina.destroy();
    }
  }

  /** True when a lane of `lane`'s class (background, or not) other than it is neither hogged, warming nor down (the fair queue chooses which). */
  anyFreeBesides(lane: Lane): boolean {
    const background = lane.kind === "background";
    return this.all.some((l) => l !== lane && (l.kind === "background") === background && !l.hogged && !l.warming && !l.down);
  }

  get queueSize(): number {
    return this.all.reduce((n, l) => n + l.piscina.queueSize, 0);
  }

  /** Tasks running on the lanes' threads now. */
  get running(): number {
    return this.all.reduce((n, l) => n + l.active, 0);
  }

  /** The worker threads' memory, summed over their last reports. */
  memory(): WorkerMemory {
    const sum: WorkerMemory = { heapUsed: 0, heapTotal: 0, external: 0, spares: 0, images: 0, compiler: 0 };
    for (const lane of this.all) {
      const m = lane.memory;
      if (!m) continue;
      for (const k of Object.keys(sum) as Array<keyof WorkerMemory>) sum[k] += m[k];
    }
    return sum;
  }

  get utilization(): number {
    return this.all.reduce((n, l) => n + l.piscina.utilization, 0) / this.all.length;
  }

  /** Terminates the worker thread with this id, in whichever lane (piscina starts a new one, warmed before it takes work). */
  terminate(threadId: number | undefined): void {
    for (const lane of this.all) {
      const w = lane.piscina.threads.find((t) => t.threadId === threadId);
      if (!w) continue;
      lane.clearHold();
      lane.memory = undefined;
      lane.replaced = w.terminate().catch(() => undefined);
      this.warm(lane);
    }
  }

  onError(fn: (err: unknown, lane: Lane) => void): void {
    this.errorHandlers.push(fn);
    for (const lane of this.all) lane.piscina.on("error", (err: unknown) => fn(err, lane));
  }

  async destroy(): Promise<void> {
    clearInterval(this.retireTimer);
    await Promise.all(this.all.map((l) => l.piscina.destroy()));
  }
}

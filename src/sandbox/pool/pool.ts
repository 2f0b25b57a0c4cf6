/**
 * The sidecar's pool of QuickJS workers (one piscina per thread, ./lanes.ts): the fair
 * queue that places tasks on its threads (./scheduler.ts), each session's share of their
 * time (./cpu-budget.ts), whether the threads can run code (./pool-health.ts), which
 * sessions' execs start on a grown instance (./room-hints.ts), and what it publishes for
 * metrics. A worker hosts several tasks at once, because a VM that awaits tool results does
 * not use its thread. Each task, every attempt at running it, moving it off a lane another
 * guest holds, and the host's own wall-clock kill of a guest that ignores its deadline are
 * in ./pool-task.ts.
 */
import { poolLanes, type Lanes } from "./lanes.js";
import type { ExecEvents, ExecHandle, Submission } from "./pool-contract.js";
import { RoomHints } from "./room-hints.js";
import { logLaneAdded, RecentCatalogs } from "./lane-warmup.js";
import { PoolHealthMonitor } from "./pool-health.js";
import { PoolTask, type TaskPool } from "./pool-task.js";
import { FairScheduler } from "./scheduler.js";
import { CpuBudget, cpuShareWindowMs, INTERNAL_TENANT } from "./cpu-budget.js";
import type { Logger } from "../../shared/logger.js";
import type { VmStart, WorkerMemory } from "./task-protocol.js";

export type PoolOptions = {
  threads?: number;
  /** Execs one worker hosts at once (VMs awaiting tools do not use the thread). */
  execsPerWorker?: number;
  /** Threads started at once (default: all); the others wait for `startDeferred` (./lanes.ts). */
  startThreads?: number;
  log: Logger;
};

export class SandboxPool {
  private readonly lanes: Lanes;
  private readonly budget: CpuBudget;
  private readonly scheduler: FairScheduler;
  /** Catalogs of the latest execs: a new thread prepares their images before it takes work. */
  private readonly recent = new RecentCatalogs();
  /** Sessions whose execs start on a grown instance (./room-hints.ts). */
  private readonly room = new RoomHints();
  /** Ids of attempts, which a worker publishes while its VM holds the thread (./lanes.ts). */
  private nextTaskId = 0;
  private closed = false;
  /** Can the pool still run code (its threads (re)start and run the warm-up probe: ./pool-health.ts)? */
  readonly health: PoolHealthMonitor;
  readonly threads: number;
  /** Execs the pool runs at once: threads times execs per worker. */
  readonly slots: number;
  /** How tasks' VMs started (../worker/warm-vms.ts), for metrics. */
  readonly vmStarts: Record<VmStart, number> = { reused: 0, restored: 0, fresh: 0, snapshot: 0 };
  /** Execs that may wait for a free worker slot before new ones are refused: two more rounds of every slot. */
  readonly maxQueue: number;
  /** What its tasks use of the pool (./pool-task.ts). */
  private readonly taskPool: TaskPool;

  private constructor(lanes: Lanes, threads: number, slots: number, log: Logger) {
    this.lanes = lanes;
    this.budget = new CpuBudget(threads, cpuShareWindowMs());
    this.scheduler = new FairScheduler(
      lanes,
      slots / threads,
      (tenant) => this.budget.usedMs(tenant),
      this.budget.windowMs * threads,
      (tenant) => this.budget.tenantRank(tenant),
    );
    lanes.onAdd = logLaneAdded(lanes, log);
    this.health = new PoolHealthMonitor(lanes, this.recent, log);
    lanes.onWarmed = () => this.scheduler.pump();
    this.threads = threads;
    this.slots = slots;
    this.maxQueue = slots * 2;
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the tasks read the pool's closing state live
    const pool = this;
    this.taskPool = {
      lanes,
      scheduler: this.scheduler,
      budget: this.budget,
      health: this.health,
      room: this.room,
      vmStarts: this.vmStarts,
      log,
      get closed() {
        return pool.closed;
      },
      nextTaskId: () => (this.nextTaskId = (this.nextTaskId % 2_000_000_000) + 1),
      terminate: (threadId) => lanes.terminate(threadId),
    };
  }

  static async create(options: PoolOptions): Promise<SandboxPool> {
    const { lanes, threads, execsPerWorker } = await poolLanes(options);
    return new SandboxPool(lanes, threads, threads * execsPerWorker, options.log);
  }

  get utilization(): number {
    return this.lanes.utilization;
  }

  /** Surge and background threads running now, beyond `threads` (./lanes.ts). */
  get extraThreads(): { surge: number; background: number } {
    return { surge: this.lanes.surges, background: this.lanes.backgrounds };
  }

  /** The worker threads' memory (metrics; ../worker/memory-report.ts). */
  get workerMemory(): WorkerMemory {
    return this.lanes.memory();
  }

  /** Tasks waiting for a free slot on a worker (metrics); `load` adds those running (a warm-up waits for none). */
  get queueSize(): number {
    return this.lanes.queueSize + this.scheduler.size;
  }
  get load(): number {
    return this.lanes.running + this.queueSize;
  }

  /** Why a new exec of `tenant` (a session, ./cpu-budget.ts) is refused now, or undefined (./scheduler.ts `refusal`, then the CPU shares). */
  refusal(tenant: string): string | undefined {
    return (
      this.scheduler.refusal(tenant, this.lanes.queueSize, this.threads, this.maxQueue) ?? this.budget.refusal(tenant) ?? this.budget.tenantRefusal(tenant)
    );
  }

  /** Thread time a tenant's programs held within the CPU share's window (ms; 0 without tenants). */
  tenantUsedMs(tenant: string): number {
    return this.budget.tenantUsedMs(tenant);
  }

  /** Shares the pool between the tenants of a tenants file by their weight (../../shared/tenants.ts); their sessions share their part. */
  setTenantWeights(weightOf: (tenant: string) => number): void {
    this.budget.setWeights(weightOf);
  }

  /** Runs a task; `tenant` (the session, see ./cpu-budget.ts; none for the sidecar's own probes) is charged the thread time its VM held. */
  exec(submission: Submission, events: ExecEvents, tenant = INTERNAL_TENANT): ExecHandle {
    this.budget.started(tenant);
    if (submission.kind === "exec") this.recent.note(submission.catalog, submission.surface);
    return new PoolTask(this.taskPool, submission, events, tenant, submission.kind === "exec" && this.room.take(tenant)).start();
  }

  /** Threads started now: the start probe runs on each (./pool-start.ts). */
  get startedThreads(): number {
    return this.lanes.started;
  }

  /** Warms up the threads deferred at creation (`startThreads`) that no task has started (./lanes.ts). */
  startDeferred(): void {
    if (!this.closed) this.lanes.startDeferred();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.health.close();
    await this.lanes.destroy();
  }
}

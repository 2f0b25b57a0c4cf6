/**
 * Whether a sandbox pool that started can still run code, watched at runtime (PoolHealth).
 * The start probe (./pool-start.ts) proves it once; afterwards a thread killed for a loop
 * that ignored its deadline (or one that died) is replaced by piscina, and the replacement
 * may fail to load the worker module or to run code. The sidecar reports this health over
 * its link (../server.ts → OrchestratorLink.setPoolHealth): the orchestrator gives Tool
 * Search runs of mode code mode tools while no attached sidecar can run code.
 *
 * A lane (./lanes.ts) is *down* when its latest warm-up (./lane-warmup.ts) had every probe
 * fail: it stays warming, gets nothing from the fair queue, and is retried with one probe
 * after a backoff (RETRY_FIRST_MS doubling to RETRY_MAX_MS), never in a respawn loop. The
 * pool can run code while one base lane is not down; while it cannot, a new exec fails at
 * once with `runtime_unavailable` (./pool-task.ts) and a wait is refused before it claims
 * its run (docs/module-notes.md#srcsandboxpoolpool-healthts).
 */
import type { Lane, Lanes } from "./lanes.js";
import { warmLane, type RecentCatalogs } from "./lane-warmup.js";
import type { Logger } from "../../shared/logger.js";

/** Whether this sidecar's worker pool can run guest code, and if not, why. */
export type PoolHealth = { canRunCode: boolean; reason: string };

/** A pool that passed its start-up probe (the sidecar starts its link only then, unless told otherwise). */
export const POOL_STARTED: PoolHealth = { canRunCode: true, reason: "" };

/** The first retry of a down lane comes after this; each failed one doubles it, up to RETRY_MAX_MS. */
const RETRY_FIRST_MS = 500;
/** A down lane is retried at least this often (one thread start each: cheap, and recovery is heard within it). */
const RETRY_MAX_MS = 15_000;

type Down = {
  reason: string;
  since: number;
  /** The next retry's delay. */
  backoffMs: number;
  timer?: NodeJS.Timeout;
  /** Lets the lane take work again (./lanes.ts `onWarm`'s done). */
  done: () => void;
};

export class PoolHealthMonitor {
  private readonly down = new Map<Lane, Down>();
  private health: PoolHealth = { canRunCode: true, reason: "" };
  private readonly listeners = new Set<(health: PoolHealth) => void>();
  private closed = false;

  constructor(
    private readonly lanes: Lanes,
    private readonly recent: RecentCatalogs,
    private readonly log: Logger,
  ) {
    // A new thread (surge or replaced) takes no task until it has prepared the catalogs in use.
    lanes.onWarm = (lane, done) => this.warm(lane, done);
    lanes.onError((err, lane) => this.threadError(err, lane));
  }

  /** Whether the pool can run code now, and if not, why. */
  get current(): PoolHealth {
    return { ...this.health };
  }

  /** Calls `listener` with the health now, then with every change. */
  onChange(listener: (health: PoolHealth) => void): void {
    this.listeners.add(listener);
    listener(this.current);
  }

  /** Why a task cannot run now (the pool cannot run code), or undefined. */
  refusal(): string | undefined {
    if (this.health.canRunCode) return undefined;
    return `the sandbox pool cannot run code now (${this.health.reason}); retry later or on another sidecar.`;
  }

  close(): void {
    this.closed = true;
    for (const d of this.down.values()) clearTimeout(d.timer);
    this.down.clear();
  }

  /** The lanes' warm-up (./lanes.ts `onWarm`): probes the empty catalog and the recent ones. */
  private warm(lane: Lane, done: () => void): void {
    const t0 = Date.now();
    const targets = this.recent.list();
    const replaced = lane.replaced;
    warmLane(
      lane,
      targets,
      (o) => {
        if (this.closed) return done();
        // The thread was killed during its warm-up (a light guest's loop there took its probes with it): warm its replacement.
        if (o.verdict === "failed" && lane.replaced !== replaced) return this.warm(lane, done);
        if (o.verdict === "failed") return this.wentDown(lane, o.reason, done);
        this.log.info(
          { lane: lane.index, ms: Date.now() - t0, catalogs: targets.length, ...(o.verdict === "busy" ? { probes: "still running" } : {}) },
          "new worker thread warmed: it takes work now",
        );
        done();
      },
      () => this.cameUp(lane),
    );
  }

  /** A lane's warm-up or retry failed: it stays warming and is retried after a backoff. */
  private wentDown(lane: Lane, reason: string, done: () => void): void {
    let d = this.down.get(lane);
    if (d) {
      d.backoffMs = Math.min(RETRY_MAX_MS, d.backoffMs * 2);
      this.log.debug({ lane: lane.index, reason, retryInMs: d.backoffMs }, "worker thread still cannot run code");
    } else {
      d = { reason, since: Date.now(), backoffMs: RETRY_FIRST_MS, done };
      this.down.set(lane, d);
      lane.down = true;
      this.log.warn({ lane: lane.index, reason, retryInMs: d.backoffMs }, "worker thread cannot run code: retrying it with a backoff");
      this.update();
    }
    const entry = d;
    entry.timer = setTimeout(() => this.retry(lane, entry), entry.backoffMs);
    entry.timer.unref();
  }

  private retry(lane: Lane, d: Down): void {
    if (this.closed || this.down.get(lane) !== d) return;
    // A surge lane retired meanwhile (./lanes.ts) needs no thread any more.
    if (!this.lanes.all.includes(lane)) {
      this.down.delete(lane);
      return this.update();
    }
    const replaced = lane.replaced;
    warmLane(
      lane,
      [],
      (o) => {
        if (this.closed || this.down.get(lane) !== d) return;
        if (o.verdict === "failed" && lane.replaced !== replaced) this.retry(lane, d);
        else if (o.verdict === "failed") this.wentDown(lane, o.reason, d.done);
        else this.cameUp(lane);
      },
      () => this.cameUp(lane),
    );
  }

  private cameUp(lane: Lane): void {
    const d = this.down.get(lane);
    if (!d || this.closed) return;
    clearTimeout(d.timer);
    this.down.delete(lane);
    lane.down = false;
    this.log.info({ lane: lane.index, downMs: Date.now() - d.since }, "worker thread runs code again: it takes work now");
    d.done();
    this.update();
  }

  /**
   * piscina reports a thread's error when no task was on it. A lane left with no thread
   * (the replacement of a thread that died failed to start) is warmed, so it is probed; a
   * down lane's retries failing again are expected and logged at debug.
   */
  private threadError(err: unknown, lane: Lane): void {
    if (this.down.has(lane)) return this.log.debug({ err, lane: lane.index }, "a retried worker thread failed again");
    this.log.error({ err, lane: lane.index }, "pool worker error");
    if (!this.closed && lane.piscina.threads.length === 0) this.lanes.warm(lane);
  }

  private update(): void {
    const base = this.lanes.all.slice(0, this.lanes.base);
    const firstDown = base.every((l) => this.down.has(l)) ? this.down.get(base[0]!) : undefined;
    const canRunCode = firstDown === undefined;
    if (canRunCode === this.health.canRunCode) return;
    // The first base lane's reason, fixed for the episode (any down lane says why).
    this.health = canRunCode
      ? { canRunCode: true, reason: "" }
      : { canRunCode: false, reason: `no worker thread of the sandbox pool can run code: ${firstDown!.reason}` };
    for (const listener of this.listeners) listener(this.current);
  }
}

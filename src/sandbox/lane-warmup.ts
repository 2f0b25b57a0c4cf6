/**
 * The probe program the pool runs to prove a lane can run code and to warm it: its worker
 * compiles the prelude and prepares its VM images before real work arrives. Used at start
 * (./pool-start.ts, through the fair queue) and for every lane whose thread is new (a surge
 * lane, or a thread replaced after a kill: ./lanes.ts keeps such a lane *warming*, out of
 * the fair queue, until its probes ran). A new thread probes the empty catalog and the
 * catalogs of the latest execs, so the first real task there finds its image prepared.
 */
import { MessageChannel } from "node:worker_threads";
import type { Lane } from "./lanes.js";
import type { Logger } from "../shared/logger.js";
import { shareCatalog } from "./shared-catalog.js";
import { EMPTY_GUEST_CATALOG, type GuestCatalog, type Task, type TaskSurface, type WorkerMessage } from "./task-protocol.js";

/** Small limits for `return 1`. */
export const PROBE_LIMITS = { timeoutMs: 10_000, memoryLimitBytes: 16 * 1024 * 1024, maxOutputBytes: 1_024, maxPendingToolCalls: 1, maxSnapshotBytes: 1_024 };
/** A warm-up that takes longer than this lets the lane take work anyway (its worker is starting, or failing). */
const WARM_LIMIT_MS = 3_000;
/** Catalogs (by surface and version) a new thread prepares images for. */
const RECENT_CATALOGS = 3;

export type WarmTarget = { catalog: GuestCatalog; surface: TaskSurface };

/** The catalogs of the latest execs that use prepared images (versioned, no per-run context). */
export class RecentCatalogs {
  private readonly byKey = new Map<string, WarmTarget>();

  note(catalog: GuestCatalog, surface: TaskSurface = "code"): void {
    if (!catalog.version || catalog.needsContext || surface === "mcp_run") return;
    const key = `${surface}:${catalog.version}`;
    this.byKey.delete(key);
    this.byKey.set(key, { catalog, surface });
    if (this.byKey.size > RECENT_CATALOGS) this.byKey.delete(this.byKey.keys().next().value!);
  }

  list(): WarmTarget[] {
    return [...this.byKey.values()];
  }
}

/**
 * Runs the code-mode probe on `lane` for the empty catalog and each of `targets`, ignoring
 * the outcomes; `done` (if given) is called once, when all ended or WARM_LIMIT_MS passed.
 */
export function warmLane(lane: Lane, targets: WarmTarget[] = [], done?: () => void): void {
  const all: WarmTarget[] = [{ catalog: EMPTY_GUEST_CATALOG, surface: "code" }, ...targets];
  let left = all.length;
  let over = false;
  const finish = () => {
    if (over) return;
    over = true;
    clearTimeout(limit);
    done?.();
  };
  const limit = setTimeout(finish, WARM_LIMIT_MS);
  limit.unref();
  const ended = () => {
    if (--left === 0) finish();
  };
  for (const t of all) {
    const channel = new MessageChannel();
    channel.port1.on("message", (m: WorkerMessage) => {
      if (m.t !== "done") return;
      channel.port1.close();
      ended();
    });
    const task: Task = { kind: "exec", source: "return 1", language: "javascript", limits: PROBE_LIMITS, catalog: shareCatalog(t.catalog), contextJson: "null", outputBytesUsed: 0, surface: t.surface, port: channel.port2 };
    lane.piscina.run(task, { transferList: [channel.port2] }).catch(() => {
      channel.port1.close();
      ended();
    });
  }
}

/** The lanes' warm-up (./lanes.ts `onWarm`): probes the empty catalog and the recent ones, then logs. */
export function warmer(recent: RecentCatalogs, log: Logger): (lane: Lane, done: () => void) => void {
  return (lane, done) => {
    const t0 = Date.now();
    const targets = recent.list();
    warmLane(lane, targets, () => {
      log.info({ lane: lane.index, ms: Date.now() - t0, catalogs: targets.length }, "new worker thread warmed: it takes work now");
      done();
    });
  };
}

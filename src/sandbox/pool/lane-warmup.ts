/**
 * The probe program the pool runs to prove a lane can run code and to warm it: its worker
 * compiles the prelude and prepares its VM images before real work arrives. Used at start
 * (./pool-start.ts, through the fair queue) and for every lane whose thread is new (a surge
 * lane, or a thread replaced after a kill: ./lanes.ts keeps such a lane *warming*, out of
 * the fair queue, until its probes ran). A new thread probes the empty catalog and the
 * catalogs of the latest execs, so the first real task there finds its image prepared. The
 * outcome (did a probe run?) tells ./pool-health.ts whether the lane's thread can run code.
 * It also logs each surge or background lane the pool adds, before its warm-up starts.
 */
import { MessageChannel } from "node:worker_threads";
import type { Lane, Lanes } from "./lanes.js";
import type { Logger } from "../../shared/logger.js";
import { shareCatalog } from "./shared-catalog.js";
import { EMPTY_GUEST_CATALOG, type GuestCatalog, type Task, type TaskSurface, type WorkerMessage } from "./task-protocol.js";

/**
 * The probe program: it returns 1, after going through the syntax model code is made of
 * (operators, calls and arrows, loops, literals and templates, destructuring and spread,
 * try/catch, await), so the thread has compiled and run those parts of QuickJS once
 * before the first exec needs them.
 */
export const PROBE_SOURCE = `const xs = [1, 2, 3].map((x) => x * 2 + 1);
let s = 0;
for (const x of xs) if (x > 2 && x % 2 === 1) s += x;
for (let i = 0; i < 3; i++) s -= i;
const o = { a: s, b: \`n\${s}\`, ...{ c: [s, ...xs] } };
const { a, b, c: [first] } = o;
try { JSON.parse(JSON.stringify(o)); } catch (e) { s = -1; }
const v = await Promise.resolve(a);
return v === first && b.length > 0 ? 1 : 0;`;

/** Small limits for the probe. */
export const PROBE_LIMITS = { timeoutMs: 10_000, memoryLimitBytes: 16 * 1024 * 1024, maxOutputBytes: 1_024, maxPendingToolCalls: 1, maxSnapshotBytes: 1_024 };
/** A warm-up ends after this: a lane whose probe started takes work (its thread is busy); one where none started failed it. */
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
 * What a lane's warm-up showed: `ran` (a probe completed: the thread runs code), `busy` (a
 * probe started but none completed within WARM_LIMIT_MS, or a guest holds the thread: it
 * loaded and is busy, so it takes work as before), or `failed` (every probe was rejected,
 * failed, or not even started within the limit: ./pool-health.ts counts the lane down).
 */
export type WarmOutcome = { verdict: "ran" | "busy" } | { verdict: "failed"; reason: string };

type Probe = { state: "pending" | "started" | "ran" | "failed"; abort: AbortController };

/**
 * Runs the code-mode probe on `lane` for the empty catalog and each of `targets`; `done`
 * (if given) is called once, with the outcome, when all ended or WARM_LIMIT_MS passed, and
 * `ranLate` once if a probe completes after a `failed` or `busy` outcome (a thread that was
 * slow to load). The probes go to the lane's new thread: they are posted once the killed
 * one has exited (`lane.replaced`). A thread that fails before it loads the worker module
 * leaves its queued probes to no thread: they are dropped from piscina's queue, so retries
 * do not pile them up.
 */
export function warmLane(lane: Lane, targets: WarmTarget[] = [], done?: (outcome: WarmOutcome) => void, ranLate?: () => void): void {
  const all: WarmTarget[] = [{ catalog: EMPTY_GUEST_CATALOG, surface: "code" }, ...targets];
  const probes: Probe[] = all.map(() => ({ state: "pending", abort: new AbortController() }));
  let reason = "";
  let over = false;
  let verdict: WarmOutcome["verdict"] | undefined;
  let late = false;
  /** Nothing can run the queued probes when the lane has no thread (piscina starts one only for a new task). */
  const dropQueued = () => {
    if (lane.piscina.threads.length > 0) return;
    for (const p of probes) {
      if (p.state !== "pending") continue;
      p.state = "failed";
      p.abort.abort();
    }
  };
  // piscina emits a thread's error when no task is on it: a thread that failed to start.
  const startFailed = (err: unknown) => {
    // A thread that failed after it loaded is replaced at once by piscina: the probes wait for that one.
    if (lane.piscina.threads.length > 0) return;
    reason ||= `a new worker thread failed to start: ${(err as Error)?.message ?? String(err)}`;
    dropQueued();
    settle();
  };
  const finish = () => {
    if (over) return;
    over = true;
    clearTimeout(limit);
    lane.piscina.off("error", startFailed);
    verdict = probes.some((p) => p.state === "ran") ? "ran" : probes.some((p) => p.state === "started") || lane.holder() !== 0 ? "busy" : "failed";
    if (verdict !== "failed") return done?.({ verdict });
    dropQueued();
    done?.({ verdict, reason: reason || `no warm-up probe started within ${WARM_LIMIT_MS} ms` });
  };
  const settle = () => {
    if (probes.every((p) => p.state === "ran" || p.state === "failed")) finish();
  };
  const limit = setTimeout(finish, WARM_LIMIT_MS);
  limit.unref();
  lane.piscina.on("error", startFailed);
  void lane.replaced.then(() => {
    if (over) return;
    all.forEach((t, i) => {
      const probe = probes[i]!;
      if (probe.state !== "pending") return;
      const channel = new MessageChannel();
      const ended = (ok: boolean, why: string) => {
        channel.port1.close();
        if (probe.state === "ran" || probe.state === "failed") return;
        probe.state = ok ? "ran" : "failed";
        if (!ok) reason ||= why;
        if (ok && over && verdict !== "ran" && !late) {
          late = true;
          ranLate?.();
        }
        if (!over) settle();
      };
      channel.port1.on("message", (m: WorkerMessage) => {
        if (m.t === "started" && probe.state === "pending") probe.state = "started";
        if (m.t === "done")
          ended(
            m.outcome.status === "completed",
            m.outcome.status === "failed" ? `the warm-up probe failed: ${m.outcome.error}` : `the warm-up probe ended ${m.outcome.status}`,
          );
      });
      const task: Task = {
        kind: "exec",
        source: PROBE_SOURCE,
        language: "javascript",
        limits: PROBE_LIMITS,
        catalog: shareCatalog(t.catalog),
        contextJson: "null",
        outputBytesUsed: 0,
        surface: t.surface,
        port: channel.port2,
      };
      lane.piscina
        .run(task, { transferList: [channel.port2], signal: probe.abort.signal })
        .catch((err: unknown) => ended(false, `the warm-up probe's worker thread stopped: ${(err as Error)?.message ?? String(err)}`));
    });
  });
}

/** Logs each surge or background lane the pool adds (./lanes.ts `onAdd`). */
export function logLaneAdded(lanes: Lanes, log: Logger): (lane: Lane) => void {
  return (lane) => {
    if (lane.kind === "surge")
      log.info(
        { lane: lane.index, hogged: lanes.all.filter((l) => l.hogged).length, surges: lanes.surges },
        "computing guests hold lanes: adding a surge thread",
      );
    else log.info({ lane: lane.index, backgrounds: lanes.backgrounds }, "heavy sessions' work waits: adding a background thread (lower OS priority)");
  };
}

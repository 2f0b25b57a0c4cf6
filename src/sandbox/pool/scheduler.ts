/**
 * The pool's queue, fair between sessions. A task waits here until a lane (./lanes.ts) has
 * room and is not held by a computing guest; then the waiting task of the session that used
 * the least CPU over the last window goes first (oldest first among equals; with tenants, of
 * the tenant that used the least per unit of weight), so a session whose programs burn CPU
 * waits behind the others, never the others behind it. A *heavy* session (over HEAVY_SHARE
 * of the pool's thread time, or whose guest holds a lane now or held one for LOOP_MS within
 * HOG_MEMORY_MS) runs only on background lanes, one task per lane at most. While computing guests hold light lanes and light work waits, it adds a
 * surge lane; a new thread takes no heavy task until it has warmed.
 *
 * A session's light work *joins its own working thread* (a lane running only its tasks
 * placed less than PACK_YOUNG_MS ago) before it wakes an idle one; other sessions' tasks
 * and the sidecar's own never join. A packed task not started within PACK_LEASH_MS is
 * placed spread (./pool-task.ts). Why: docs/module-notes.md#srcsandboxpoolschedulerts.
 */
import { HOG_MS, type Lane, type Lanes } from "./lanes.js";
import { INTERNAL_TENANT } from "./cpu-budget.js";

/** The share of the pool's thread time over the window past which a session counts as heavy. */
export const HEAVY_SHARE = 0.05;
/**
 * How long a session whose guest held a lane stays heavy (for placing its tasks) after
 * that. The CPU window alone forgets a looping session after a quiet spell, and its next
 * loop then lands on a light lane: in the hostile-mix soak, every attacker's first loop
 * after a pause took a light lane, and benign work queued for up to 1.5 s. With 60 s, the
 * soak's worst burst was still its first seconds, when attackers quiet for 1 to 5 minutes
 * came back at once. A session that loops is likely to loop again (a model retries). Its
 * tasks then run on background lanes (at a lower OS priority) and behind light work.
 */
export const HOG_MEMORY_MS = 10 * 60_000;
/**
 * How long a guest must hold its lane (in one hold, or in one task's CPU) for its session
 * to be remembered as looping (HOG_MEMORY_MS). A shorter computation (a 65 ms loop, a large
 * answer parsed) makes its session heavy only while it holds the lane, and through the CPU
 * share: marked for 10 minutes after one such program, a conversation ran one task at a
 * time on a background lane. The hostile loops it is for hold 300 ms (cancelled) to
 * seconds.
 */
export const LOOP_MS = 250;
/** A light task joins a busy lane only while every task there was placed less than this ago. */
export const PACK_YOUNG_MS = 2;
/** How long a packed task may wait to start before it is placed spread instead (./pool-task.ts). */
export const PACK_LEASH_MS = 3;

export type Waiting = {
  tenant: string;
  /** Place it on the least loaded lane, never packed (a task taken back from a packed lane, a run continued from its image). */
  spread?: boolean;
  /** A lane it was just taken back from: any other with room comes first. */
  avoid?: Lane;
  /** Starts the task on `lane`; `packed` when it joined a busy lane (it gets a leash). */
  run(lane: Lane, packed: boolean): void;
  /** True when the task no longer needs a lane (it ended meanwhile); it is dropped. */
  gone(): boolean;
};

export class FairScheduler {
  private readonly queue: Waiting[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly lanes: Lanes,
    /** Tasks one lane runs at once. */
    private readonly capacity: number,
    /** CPU (ms) a session used over the recent window (./cpu-budget.ts). */
    private readonly usedMs: (tenant: string) => number,
    /** The pool's thread time over that window (ms). */
    private readonly windowThreadMs: number,
    /** The order between tenants (./cpu-budget.ts `tenantRank`): lower goes first; the same for every session without tenants. */
    private readonly tenantRank: (tenant: string) => number = () => 0,
  ) {}

  get size(): number {
    return this.queue.length;
  }

  /** Tasks of `tenant` waiting here. */
  waitingFor(tenant: string): number {
    let n = 0;
    for (const w of this.queue) if (w.tenant === tenant) n++;
    return n;
  }

  /**
   * Why a new task of `tenant` may not queue now, or undefined: the queue (here and in the
   * lanes, `inLanes`) is bounded at `maxQueue`, but a session with nothing waiting may still
   * queue up to twice that, so sessions that fill the queue never lock a new conversation
   * out; a session may hold half of the queue, and a heavy one, which runs one task per
   * background lane anyway, one waiting task per thread.
   */
  refusal(tenant: string, inLanes: number, threads: number, maxQueue: number): string | undefined {
    const waiting = this.waitingFor(tenant);
    const queued = inLanes + this.size;
    if (queued >= (waiting === 0 ? 2 * maxQueue : maxQueue))
      return `this sidecar is at capacity (${queued} execs already wait for a worker); retry later or send the exec to another sidecar`;
    if (waiting >= threads && this.heavy(tenant, false)) {
      return `this session's programs hold the sandbox's threads more than others and it already has ${waiting} execs waiting for a worker; wait for them to finish`;
    }
    if (waiting >= maxQueue / 2) return `this session already has ${waiting} execs waiting for a worker, half of this sidecar's queue; wait for them to finish`;
    return undefined;
  }

  submit(w: Waiting): void {
    this.queue.push(w);
    this.pump();
  }

  /** Starts waiting tasks while a lane has room; called on submit, when a task leaves a lane, and every HOG_MS while tasks wait. */
  pump(): void {
    // Not re-entrant: a task that ends while the queue is walked calls back here.
    if (this.pumping) {
      this.again = true;
      return;
    }
    this.pumping = true;
    try {
      do {
        this.again = false;
        this.pumpOnce();
      } while (this.again);
    } finally {
      this.pumping = false;
    }
  }

  private pumping = false;
  private again = false;

  private pumpOnce(): void {
    this.forgetHogs(Date.now());
    for (;;) {
      const live = this.queue.filter((w) => !w.gone());
      this.queue.splice(0, this.queue.length, ...live);
      if (this.queue.length === 0) break;
      // The least-used session's oldest task that has a lane it may use.
      this.heavyNow.clear();
      let best = -1;
      let bestRank = Infinity;
      let bestUse = Infinity;
      let bestLane: Lane | undefined;
      let packed = false;
      for (let i = 0; i < this.queue.length; i++) {
        const w = this.queue[i]!;
        const rank = this.tenantRank(w.tenant);
        if (rank > bestRank) continue;
        const use = this.usedMs(w.tenant);
        if (rank === bestRank && use >= bestUse) continue;
        const join = w.spread ? undefined : this.busyLaneToJoin(w.tenant);
        const lane = join ?? this.free(w.tenant, w.avoid);
        if (!lane) continue;
        best = i;
        bestRank = rank;
        bestUse = use;
        bestLane = lane;
        packed = join !== undefined;
      }
      if (best < 0) {
        this.surgeIfHeld();
        break;
      }
      this.queue.splice(best, 1)[0]!.run(bestLane!, packed);
    }
    if (this.queue.length > 0 && !this.timer) {
      this.timer = setInterval(() => this.pump(), HOG_MS);
      this.timer.unref();
    } else if (this.queue.length === 0 && this.timer) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  private lastSurge = 0;

  /**
   * Tasks wait and no lane can take them: when computing guests hold lanes (not when the
   * lanes are merely full), add a surge lane (./lanes.ts) so the others need not wait for
   * the loops to end; at most one per slice.
   */
  private surgeIfHeld(): void {
    if (this.queue.some((w) => !this.heavy(w.tenant))) this.surge();
  }

  /**
   * Adds a surge lane when computing guests hold lanes (at most one per slice): for waiting
   * tasks, or for an idle run on a held lane that has nowhere to move (./pool-task.ts).
   */
  surge(): void {
    const now = Date.now();
    if (now - this.lastSurge < 2 * HOG_MS) return;
    if (!this.lanes.all.some((l) => l.kind !== "background" && l.hogged)) return;
    this.lastSurge = now;
    this.lanes.surge();
  }

  /** heavy() per session within one walk of the queue (asked per lane and per waiting task). */
  private readonly heavyNow = new Map<string, boolean>();
  /** When each session's guest was last seen holding a lane (HOG_MEMORY_MS; oldest first). */
  private readonly hoggedAt = new Map<string, number>();

  /** A guest of `tenant` holds a lane for LOOP_MS now, or a task of it ended having used that much CPU. */
  noteHog(tenant: string, now = Date.now()): void {
    this.hoggedAt.delete(tenant);
    this.hoggedAt.set(tenant, now);
  }

  private forgetHogs(now: number): void {
    for (const [t, at] of this.hoggedAt) {
      if (now - at < HOG_MEMORY_MS) break;
      this.hoggedAt.delete(t);
    }
  }

  /**
   * Whether `tenant` used more than its light share over the window, or its guest holds a
   * lane now or (with `remembered`, for placing its tasks) held one for LOOP_MS within
   * HOG_MEMORY_MS.
   * Admission asks without it: one past loop must not get a session's execs refused.
   */
  heavy(tenant: string, remembered = true): boolean {
    let h = remembered ? this.heavyNow.get(tenant) : undefined;
    if (h === undefined) {
      let holding = false;
      for (const l of this.lanes.all) {
        if (l.hogger !== tenant) continue;
        holding = true;
        if (l.heldMs() >= LOOP_MS) this.noteHog(tenant);
      }
      h = holding || (remembered && this.hoggedAt.has(tenant)) || this.usedMs(tenant) > this.windowThreadMs * HEAVY_SHARE;
      if (this.pumping && remembered) this.heavyNow.set(tenant, h);
    }
    return h;
  }

  /**
   * The least loaded lane with room that no computing guest holds and `tenant` may use.
   * Heavy sessions run on background lanes only (./lanes.ts: threads at a lower OS
   * priority, added on demand), so light sessions keep the base and surge lanes; light
   * sessions keep off a lane a heavy one holds (a session's first loop, before it counted
   * as heavy) while another lane has room, so a VM that already talked to its gateway is
   * rarely on a thread a loop may get killed on (it would continue from its parked image,
   * later).
   */
  private free(tenant: string, avoid?: Lane): Lane | undefined {
    if (this.heavy(tenant)) return this.freeBackground(tenant);
    const all = this.lanes.all;
    const heavyLanes = new Set(all.filter((l) => l.kind !== "background" && [...l.tenants.keys()].some((t) => this.heavy(t))));
    let best: Lane | undefined;
    let bestScore = Infinity;
    for (const lane of all) {
      if (lane.kind === "background" || lane.active >= this.capacity || lane.hogged || lane.down) continue;
      // A warming lane takes light work only when no other lane can: the task then waits in
      // the new worker (as long as in this queue) instead of behind the next loop's turn here.
      const score =
        lane.active + (heavyLanes.has(lane) ? this.capacity : 0) + (lane.warming ? 3 * this.capacity : 0) + (lane === avoid ? 4 * this.capacity : 0);
      if (score < bestScore) {
        best = lane;
        bestScore = score;
      }
    }
    return best;
  }

  /**
   * For a light task: the busiest base lane with room that runs only its own session's
   * tasks, all placed less than PACK_YOUNG_MS ago, not hogged, warming or down. Undefined
   * when there is none.
   */
  private busyLaneToJoin(tenant: string): Lane | undefined {
    // The sidecar's own probes are submitted together to warm every thread: never joined.
    if (tenant === INTERNAL_TENANT || this.heavy(tenant)) return undefined;
    let best: Lane | undefined;
    for (const lane of this.lanes.all) {
      if (lane.kind === "background" || lane.active === 0 || lane.active >= this.capacity || lane.hogged || lane.down || lane.warming) continue;
      // Young tasks are about to end; an older one may be a VM awaiting tool answers, which
      // a computing newcomer would keep off its thread when they come (and from suspending).
      if (lane.oldestTaskMs() >= PACK_YOUNG_MS) continue;
      if (best && lane.active <= best.active) continue;
      // Only its own session's tasks: another session's guests stay on other threads.
      if (lane.tenants.size !== 1 || !lane.tenants.has(tenant)) continue;
      best = lane;
    }
    return best;
  }

  private lastBackground = 0;

  /**
   * A background lane with room that no computing guest holds and that has warmed. A heavy
   * session runs one task per half of the base lanes at most (the background lanes are
   * that many). When none can take the task, one is added if fewer exist (at most one per
   * slice): it takes work once warmed.
   */
  private freeBackground(tenant: string): Lane | undefined {
    const all = this.lanes.all;
    if (all.reduce((n, l) => n + (l.tenants.get(tenant) ?? 0), 0) >= this.lanes.maxBackground) return undefined;
    let best: Lane | undefined;
    for (const lane of all) {
      if (lane.kind !== "background" || lane.active >= this.capacity || lane.hogged || lane.warming || lane.down) continue;
      if (!best || lane.active < best.active) best = lane;
    }
    if (!best && !all.some((l) => l.kind === "background" && l.warming)) {
      const now = Date.now();
      if (now - this.lastBackground >= 2 * HOG_MS && this.lanes.background()) this.lastBackground = now;
    }
    return best;
  }
}

/**
 * Run-cache invalidations across orchestrator replicas on one Redis, so a run changed through
 * one replica is dropped by the sidecars attached to every other one. Each invalidation of
 * ./run-cache-push.ts is published on a channel every replica subscribes to, on the connection
 * that wrote the change (so it follows the write, even one that timed out and lands later);
 * a gateway's change waits until every subscriber applied it (its sidecars acked). A replica
 * is `sure` while its subscription provably delivers: it publishes beats to itself and hears
 * them back. A lost subscription or a beat that does not come back makes it unsure: its
 * sidecars stop trusting their cached runs (kept only for a store outage) and it offers no
 * caching; sure again, its sidecars drop every run they hold, as it may have missed a change.
 * Channels, under the store's base prefix: `runcache` (invalidations) and `runcache:<id>`
 * (one replica's beats, and the acks its changes await). A tenant's runs go as `all` naming
 * the tenant: a replica of a build that reads no tenant drops every run, as it did.
 */
import { randomUUID } from "node:crypto";
import type { Redis } from "ioredis";
import type { Logger } from "../../shared/logger.js";
import type { Scope } from "../../shared/scope.js";
import { storeCall } from "../state/store-failure.js";
import { quitRedis, REDIS_PREFIX } from "../suspended/redis-store.js";

/**
 * One invalidation as every replica applies it to its own sidecars: runs by name, or `all`,
 * of `tenant` when named, else of every tenant (see RunCachePush for `keepForOutage`).
 */
export type BusInvalidation = { scopes: Scope[]; all: boolean; tenant?: string; keepForOutage?: boolean; exceptSidecar?: string; awaitAcks: boolean };

/** A message on the channel. `tenant` narrows `all` to that tenant's runs; without it (or unread), `all` is every run. */
export type Wire = { from: string; id: string; scopes: Scope[]; all: boolean; tenant?: string; keep?: boolean; except?: string; acks: boolean };

/** How often a replica checks its subscription with a beat (and once as soon as it subscribed). */
const BEAT_MS = 500;
/** A beat not heard back within this makes the replica unsure. */
const STALE_MS = 2_500;
/**
 * How long a gateway's change waits for every subscriber's ack: longer than a replica takes
 * to disconnect its silent sidecars (./run-cache-push.ts), and than a replica whose
 * subscription went silent takes to notice it and stop trusting its sidecars' caches (a beat, then STALE_MS).
 */
const ACK_DEADLINE_MS = 5_000;

export class RunCacheBus {
  /** Applies an invalidation to this replica's sidecars; resolves when they acked (if asked). Set by RunCachePush. */
  apply: (inv: BusInvalidation) => Promise<void> = async () => undefined;
  /** This replica may miss invalidations from now on: its sidecars must stop trusting their cached runs. Set by RunCachePush. */
  onUnsure: () => void = () => undefined;
  /** Sure again after an unsure spell: its sidecars must drop every run they hold. Set by RunCachePush. */
  onSureAgain: () => void = () => undefined;

  private readonly channel: string;
  private readonly own: string;
  private readonly subscriber: Redis;
  private sureNow = false;
  /** Set once the replica was sure: an unsure spell after it ends with an invalidation of everything. */
  private wasSure = false;
  private subscribing: Promise<void> | undefined;
  /** Beats published and not heard back yet: sequence → when sent. */
  private readonly beats = new Map<number, number>();
  private beatSeq = 0;
  private readonly waiting = new Map<string, { got: number; need: number; done(): void }>();
  private readonly timer: NodeJS.Timeout;
  private closed = false;

  /** `publisher`: the connection the run state is written on (its owner closes it). */
  constructor(
    private readonly publisher: Redis,
    private readonly id: string,
    private readonly log: Logger,
    prefix = REDIS_PREFIX,
  ) {
    this.channel = `${prefix}runcache`;
    this.own = `${prefix}runcache:${id}`;
    // Errors show as a closed connection (unsure) and in the store's own logs; ioredis resubscribes when it reconnects.
    this.subscriber = publisher
      .duplicate({ connectionName: "codemode-runcache" })
      .on("message", (channel: string, text: string) => this.receive(channel, text))
      .on("error", () => undefined)
      .on("close", () => this.unsure("its subscription's connection closed"));
    this.timer = setInterval(() => this.tick(), BEAT_MS);
    this.timer.unref();
    this.tick();
  }

  /** True while this replica hears every invalidation published: only then may its sidecars cache runs. */
  get sure(): boolean {
    return this.sureNow;
  }

  /**
   * Publishes an invalidation to every replica (this one's subscription included). With
   * `awaitAcks`, resolves when every subscriber applied it, or when ACK_DEADLINE_MS passed
   * (logged); a store that cannot take it is UNAVAILABLE. Otherwise sent without waiting.
   */
  async publish(inv: BusInvalidation): Promise<void> {
    if (this.closed) return;
    const id = randomUUID();
    const text = JSON.stringify(toWire(inv, this.id, id));
    if (!inv.awaitAcks) {
      this.publisher.publish(this.channel, text).catch((err: unknown) => this.log.debug({ err }, "could not publish a run cache invalidation"));
      return;
    }
    let done!: () => void;
    const acked = new Promise<void>((resolve) => (done = resolve));
    const w = { got: 0, need: Number.POSITIVE_INFINITY, done };
    this.waiting.set(id, w);
    try {
      w.need = await storeCall(this.log, "announce the run's change to the other orchestrators", () => this.publisher.publish(this.channel, text));
      if (w.got >= w.need) done();
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), ACK_DEADLINE_MS)));
      const missed = await Promise.race([acked.then(() => false), late]);
      clearTimeout(timer);
      if (missed)
        this.log.warn(
          { subscribers: w.need, acked: w.got },
          "a run change was not acked by every orchestrator in time; a replica that stopped hearing invalidations drops its sidecars' cached runs",
        );
    } finally {
      this.waiting.delete(id);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    for (const w of this.waiting.values()) w.done();
    this.waiting.clear();
    this.sureNow = false;
    await quitRedis(this.subscriber);
  }

  /** Checks the beats, sends the next one, and (re)subscribes when the subscription is not there. */
  private tick(): void {
    if (this.closed) return;
    const now = Date.now();
    for (const sentAt of this.beats.values()) {
      if (now - sentAt > STALE_MS) this.unsure("a beat it published did not come back");
      break;
    }
    this.subscribe();
    this.beat();
  }

  private beat(): void {
    if (this.closed) return;
    const seq = ++this.beatSeq;
    this.beats.set(seq, Date.now());
    // Bounded while nothing comes back (the oldest, which decides staleness, is kept).
    if (this.beats.size > 64) this.beats.delete([...this.beats.keys()][1]!);
    this.publisher.publish(this.own, JSON.stringify({ beat: seq })).catch(() => undefined);
  }

  private subscribe(): void {
    if (this.subscribing) return;
    this.subscribing = this.subscriber.subscribe(this.channel, this.own).then(
      () => this.beat(),
      (err: unknown) => {
        this.subscribing = undefined;
        this.log.debug({ err }, "could not subscribe to run cache invalidations; trying again");
      },
    );
  }

  private receive(channel: string, text: string): void {
    let msg: unknown;
    try {
      msg = JSON.parse(text);
    } catch {
      return;
    }
    if (typeof msg !== "object" || msg === null) return;
    if (channel === this.own) {
      const m = msg as { beat?: unknown; ack?: unknown };
      if (typeof m.beat === "number") this.heard(m.beat);
      else if (typeof m.ack === "string") this.acked(m.ack);
    } else if (channel === this.channel) {
      this.invalidation(msg as Partial<Wire>);
    }
  }

  private heard(seq: number): void {
    for (const s of [...this.beats.keys()]) if (s <= seq) this.beats.delete(s);
    if (this.sureNow || this.closed) return;
    this.sureNow = true;
    this.log.info("run cache invalidations reach this orchestrator: its sidecars may cache runs");
    if (!this.wasSure) {
      this.wasSure = true;
      return;
    }
    // It may have missed changes while it was not subscribed.
    this.onSureAgain();
  }

  private unsure(reason: string): void {
    if (!this.sureNow) return;
    this.sureNow = false;
    this.beats.clear();
    this.log.warn({ reason }, "this orchestrator may miss run cache invalidations: its sidecars drop their cached runs until it is sure again");
    this.onUnsure();
  }

  private acked(id: string): void {
    const w = this.waiting.get(id);
    if (!w) return;
    w.got++;
    if (w.got >= w.need) w.done();
  }

  private invalidation(m: Partial<Wire>): void {
    if (typeof m.from !== "string" || typeof m.id !== "string") return;
    const inv = fromWire(m, this.id);
    const applied = this.apply(inv).catch((err: unknown) => this.log.warn({ err }, "could not apply a run cache invalidation"));
    if (m.acks !== true) return;
    // Its own change: this replica's sidecars were told directly, and waited for.
    if (m.from === this.id) return this.acked(m.id);
    const id = m.id;
    void applied.then(() =>
      this.publisher
        .publish(`${this.channel}:${m.from}`, JSON.stringify({ ack: id }))
        .catch((err: unknown) => this.log.debug({ err }, "could not ack a run cache invalidation")),
    );
  }
}

/** The message `inv` goes as, from replica `from`. */
export function toWire(inv: BusInvalidation, from: string, id: string): Wire {
  return {
    from,
    id,
    scopes: inv.scopes,
    all: inv.all,
    ...(inv.all && inv.tenant !== undefined ? { tenant: inv.tenant } : {}),
    acks: inv.awaitAcks,
    ...(inv.keepForOutage ? { keep: true } : {}),
    ...(inv.exceptSidecar !== undefined ? { except: inv.exceptSidecar } : {}),
  };
}

/** What replica `self` applies for a message (one with `from` and `id`), of this build or another. */
export function fromWire(m: Partial<Wire>, self: string): BusInvalidation {
  const scopes = Array.isArray(m.scopes) ? m.scopes.flatMap(scopeOf) : [];
  // A scope this build cannot read could name any run, which may have changed: all go, none kept.
  const unread = !Array.isArray(m.scopes) || scopes.length !== m.scopes.length || (m.all !== true && scopes.length === 0);
  const inv: BusInvalidation = { scopes, all: m.all === true || unread, awaitAcks: m.acks === true && m.from !== self };
  // Only a tenant it can read narrows `all`; anything else there could be any tenant.
  if (m.all === true && !unread && typeof m.tenant === "string" && m.tenant !== "") inv.tenant = m.tenant;
  if (typeof m.except === "string") inv.exceptSidecar = m.except;
  if (m.keep === true && !unread) inv.keepForOutage = true;
  return inv;
}

/** A scope from another replica's message; none when it is not one. */
function scopeOf(s: unknown): Scope[] {
  if (typeof s !== "object" || s === null) return [];
  const { agentId, sessionId, sessionKey, agentRunId, tenant } = s as Record<string, unknown>;
  if (typeof agentId !== "string" || typeof sessionId !== "string" || typeof sessionKey !== "string" || typeof agentRunId !== "string") return [];
  if (tenant !== undefined && typeof tenant !== "string") return [];
  return [{ agentId, sessionId, sessionKey, agentRunId, ...(tenant ? { tenant } : {}) }];
}

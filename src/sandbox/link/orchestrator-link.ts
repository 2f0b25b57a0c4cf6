/**
 * The sidecar's standing connection to the orchestrator: an Attach stream that
 * announces this sidecar with its pool health (can its worker pool run guest code; sent
 * again whenever it changes: the orchestrator offers Tool Search's mode code only while
 * an attached sidecar can), exchanges heartbeats, carries the orchestrator's pushes (tool
 * answers for live VMs, run cache invalidations), and is re-opened with backoff whenever
 * it drops. Every state change is logged and reported to listeners (the sidecar's health
 * follows it). The calls on a suspension's or a wait's path (ResolveRun, SuspendRun,
 * ClaimRun, ReleaseRun, RouteToolResult: `rpc`) ride the open stream when the
 * orchestrator takes them (./link-calls.ts), else they are unary calls over the same
 * channel, as are RecordSegment and AwaitToolResults; it dials the orchestrator's link
 * port with the link's own credentials (TLS or mTLS, and the link token as a bearer token).
 * When the orchestrator that welcomed the link is in this process (`codemode start`),
 * segment records are handed to it directly instead (../../shared/colocated.ts).
 */
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import {
  RecordSegmentRequestSchema,
  SidecarLink,
  type RunLiveSchema,
  type WaitRelay,
  type WaitRelaySchema,
} from "../../gen/codemode/orchestrator/v1/link_pb.js";
import type { ColocatedOrchestrator } from "../../shared/colocated.js";
import type { ClientSecurity } from "../../protocol/credentials.js";
import { createClient, type ServiceClient } from "../../protocol/grpc-client.js";
import { answerFromWire, type GatewayAnswer } from "../../shared/link-wire.js";
import { scopeFromLink, type Scope } from "../../shared/scope.js";
import type { Logger } from "../../shared/logger.js";
import { linkRpc, StreamCalls, type LinkRpc } from "./link-calls.js";
import { POOL_STARTED, type PoolHealth } from "../pool/pool-health.js";
import { testKnobMs } from "../../shared/limits.js";

export type LinkState = "connecting" | "up" | "down" | "closed";

const HEARTBEAT_MS = 5_000;
const MAX_BACKOFF_MS = 5_000;
/**
 * The link's gRPC keepalive: a ping after this long without traffic, and the connection
 * given up when its answer takes more than half of it (at most 5 s), so a silent network
 * path ends the link and it is opened again. Tests shorten it with
 * CODEMODE_TEST_LINK_KEEPALIVE_MS (clamped to 1 s to 10 min) rather than wait a frozen
 * link out. A test knob, not config: no deployment has needed another value, a shorter
 * one only adds pings on every link, and the orchestrator's side (../../orchestrator/link/)
 * has no keepalive of its own to keep in step; the variable's name says it is for tests.
 */
export const KEEPALIVE_LIMIT = { default: 10_000, min: 1_000, max: 600_000 } as const;
export function linkKeepalive(env: NodeJS.ProcessEnv = process.env): { timeMs: number; timeoutMs: number } {
  const timeMs = testKnobMs("CODEMODE_TEST_LINK_KEEPALIVE_MS", KEEPALIVE_LIMIT, env);
  return { timeMs, timeoutMs: Math.min(5_000, Math.round(timeMs / 2)) };
}

/** What an operator should check when the link is refused for a reason of configuration. */
function hintFor(err: unknown, tls: boolean): { hint?: string } {
  const code = (err as { code?: string }).code;
  if (code === "unavailable" && tls)
    return {
      hint: "if the orchestrator is up, check TLS: its link port's CA (--link-tls-ca), the name it is dialled by (--link-tls-server-name) and, with mutual TLS, this sidecar's client certificate",
    };
  if (code === "unauthenticated")
    return { hint: "the orchestrator refused this sidecar's link token: set the same CODEMODE_LINK_TOKEN (or --link-token-file) on both" };
  if (code === "unimplemented")
    return {
      hint: "this address does not serve SidecarLink: --orchestrator-address must be the orchestrator's link port (--link-address, default 7302), not its Control port",
    };
  return {};
}

export class OrchestratorLink {
  /**
   * Delivers an answer the orchestrator forwarded (a gateway sent it to another sidecar)
   * (or that it awaits approval) into a live VM here; true when one awaited the call. Set
   * by the server.
   */
  onDeliver: ((scope: Scope, callId: string, answer: GatewayAnswer) => boolean) | undefined;
  /** Drops cached resolved runs the orchestrator names (every one when `all`; `keepForOutage`: they did not change). Set by the run resolver. */
  onInvalidate: ((scopes: Scope[], all: boolean, keepForOutage?: boolean) => void) | undefined;
  /** A relayed wait's message from the orchestrator (../suspend/wait-relay.ts). Set by the server. */
  onRelay: ((msg: WaitRelay) => void) | undefined;
  /** This sidecar's snapshot build, for the orchestrator's BuildQuery (../suspend/own-build.ts). Set by the server. */
  onBuildQuery: (() => Promise<Uint8Array>) | undefined;
  /** Called when an open link ends: relays carried on it are over. */
  onLinkEnded: (() => void) | undefined;

  get sidecarId(): string {
    return this.identity.sidecarId;
  }

  readonly client: ServiceClient<typeof SidecarLink.method>;
  /** The link calls: on the open stream when the orchestrator takes them, else unary on `client`. */
  readonly rpc: LinkRpc;
  /** Calls in flight on the open stream; set while the link is up to an orchestrator that takes them. */
  private streamCalls: StreamCalls | undefined;
  private state: LinkState = "connecting";
  private closed = false;
  private abort = new AbortController();
  private liveExecs: () => number = () => 0;
  private readonly listeners = new Set<(state: LinkState) => void>();
  /** Sends a pool health change on the open Attach stream (undefined while none is open). */
  private sendPool: ((pool: PoolHealth) => void) | undefined;
  /** Sends a segment record on the open link; set while the link is up. */
  /** The orchestrator stores checkpoints (its welcome says so); an older one does not: no VM is checkpointed. */
  takesCheckpoints = false;
  /** The orchestrator relays waits between sidecars (its welcome says so); an older one does not: a run of another build is rebuilt here. */
  takesRelays = false;
  private sendRecord: ((req: MessageInitShape<typeof RecordSegmentRequestSchema>) => void) | undefined;
  /** Sends a relayed wait's message on the open link; set while the link is up. */
  private sendRelayMsg: ((msg: MessageInitShape<typeof WaitRelaySchema>) => void) | undefined;
  /** Sends a RunLive on the open link; set while the link is up. */
  private sendRunLive: ((msg: MessageInitShape<typeof RunLiveSchema>) => void) | undefined;

  constructor(
    readonly address: string,
    private readonly identity: { sidecarId: string; address: string; version: string },
    private readonly log: Logger,
    private readonly security: ClientSecurity = {},
    private pool: PoolHealth = POOL_STARTED,
    private readonly colocated?: ColocatedOrchestrator,
  ) {
    const keepalive = linkKeepalive();
    this.client = createClient(
      SidecarLink,
      address,
      {
        "grpc.keepalive_time_ms": keepalive.timeMs,
        "grpc.keepalive_timeout_ms": keepalive.timeoutMs,
        "grpc.max_receive_message_length": 64 * 1024 * 1024,
      },
      security,
    );
    this.rpc = linkRpc(this.client, () => (this.state === "up" ? this.streamCalls : undefined));
  }

  get linkState(): LinkState {
    return this.state;
  }

  get poolHealth(): PoolHealth {
    return this.pool;
  }

  /** Reports a change of the pool's health: at once on the open link, and in every hello from now on. */
  setPoolHealth(pool: PoolHealth): void {
    if (pool.canRunCode === this.pool.canRunCode && pool.reason === this.pool.reason) return;
    this.pool = { ...pool };
    if (pool.canRunCode) this.log.info({ canRunCode: true }, "sandbox pool can run code again; reporting it to the orchestrator");
    else this.log.warn({ canRunCode: false, reason: pool.reason }, "sandbox pool cannot run code; reporting it to the orchestrator");
    this.sendPool?.(this.pool);
  }

  /**
   * Sends a finished segment's record on the open link (one stream message instead of a
   * RecordSegment call). False when the link is not up: the caller makes the call.
   */
  recordOnLink(req: MessageInitShape<typeof RecordSegmentRequestSchema>): boolean {
    if (this.state !== "up" || !this.sendRecord) return false;
    this.sendRecord(req);
    return true;
  }

  /** Sends a relayed wait's message on the open link; false when the link is not up. */
  sendRelay(msg: MessageInitShape<typeof WaitRelaySchema>): boolean {
    if (this.state !== "up" || !this.sendRelayMsg) return false;
    this.sendRelayMsg(msg);
    return true;
  }

  /**
   * Tells the orchestrator a code-mode run's gateway now knows its id (its first nested call
   * went out): if this sidecar dies before the run ends or is stored, a wait for it is told
   * it was lost. Nothing when the link is down.
   */
  announceRun(scope: Scope, codeModeRunId: string): void {
    if (this.state === "up") this.sendRunLive?.({ scope, codeModeRunId });
  }

  /** Calls `listener` with every state change from now on. */
  onStateChange(listener: (state: LinkState) => void): void {
    this.listeners.add(listener);
  }

  start(liveExecs: () => number): void {
    this.liveExecs = liveExecs;
    void this.loop();
  }

  private setState(next: LinkState, detail?: Record<string, unknown>): void {
    if (next === this.state) return;
    this.state = next;
    const fields = { orchestrator: this.address, link: next, ...detail };
    if (next === "down") this.log.warn(fields, "orchestrator link down");
    else this.log.info(fields, `orchestrator link ${next}`);
    for (const listener of this.listeners) listener(next);
  }

  private async loop(): Promise<void> {
    let backoff = 100;
    while (!this.closed) {
      this.setState("connecting");
      const started = Date.now();
      try {
        await this.attachOnce();
        if (!this.closed) this.setState("down", { reason: "stream ended" });
      } catch (err) {
        if (this.closed) break;
        this.setState("down", { reason: (err as Error).message, ...hintFor(err, this.security.tls !== undefined) });
      }
      if (this.closed) break;
      if (Date.now() - started > 10_000) backoff = 100;
      await new Promise((r) => setTimeout(r, backoff).unref());
      backoff = Math.min(MAX_BACKOFF_MS, backoff * 2);
    }
  }

  private async attachOnce(): Promise<void> {
    const ac = new AbortController();
    this.abort = ac;
    const stream = this.client.attach({ signal: ac.signal });
    stream.send({ message: { case: "hello", value: { ...this.identity, pool: this.pool, servesRelays: this.onRelay !== undefined } } });
    const sendRelay = (msg: MessageInitShape<typeof WaitRelaySchema>) => stream.send({ message: { case: "relay", value: msg } });
    const sendRunLive = (msg: MessageInitShape<typeof RunLiveSchema>) => stream.send({ message: { case: "runLive", value: msg } });
    const sendPool = (pool: PoolHealth) => stream.send({ message: { case: "poolHealth", value: pool } });
    this.sendPool = sendPool;
    const onWire = (req: MessageInitShape<typeof RecordSegmentRequestSchema>) => stream.send({ message: { case: "record", value: req } });
    let sendRecord = onWire;
    const beat = setInterval(() => {
      stream.send({ message: { case: "heartbeat", value: { sentAtMs: BigInt(Date.now()), liveExecs: this.liveExecs() } } });
    }, HEARTBEAT_MS);
    beat.unref();
    let calls: StreamCalls | undefined;
    try {
      for await (const msg of stream.messages) {
        if (msg.message.case === "welcome") {
          // The orchestrator that welcomed this link is in this process: records skip the wire.
          const local = this.colocated?.orchestratorId === msg.message.value.orchestratorId ? this.colocated : undefined;
          if (local) sendRecord = (req) => void (local.record(this.identity.sidecarId, create(RecordSegmentRequestSchema, req)) || onWire(req));
          this.sendRecord = sendRecord;
          this.sendRelayMsg = sendRelay;
          this.sendRunLive = sendRunLive;
          this.takesCheckpoints = msg.message.value.takesCheckpoints;
          this.takesRelays = msg.message.value.takesRelays;
          if (msg.message.value.takesCalls) {
            calls = new StreamCalls((call) => stream.send({ message: { case: "call", value: call } }));
            this.streamCalls = calls;
          }
          this.setState("up", { orchestratorId: msg.message.value.orchestratorId, callsOnStream: calls !== undefined, recordsInProcess: local !== undefined });
        } else if (msg.message.case === "reply") {
          calls?.reply(msg.message.value);
        } else if (msg.message.case === "deliver") {
          // An answer a gateway sent to another sidecar, for a call one of our live VMs may await.
          const d = msg.message.value;
          let delivered = false;
          try {
            const answer = d.answer ? answerFromWire(d.answer) : undefined;
            if (answer && d.answer && this.onDeliver) delivered = this.onDeliver(scopeFromLink(d.scope), d.answer.callId, answer);
          } catch {
            delivered = false;
          }
          stream.send({ message: { case: "ack", value: { requestId: d.requestId, delivered } } });
        } else if (msg.message.case === "relay") {
          this.onRelay?.(msg.message.value);
        } else if (msg.message.case === "buildQuery") {
          const requestId = msg.message.value.requestId;
          const answer = this.onBuildQuery?.() ?? Promise.reject(new Error("this sidecar does not say its build"));
          answer.then(
            (snapshotBuild) => stream.send({ message: { case: "build", value: { requestId, snapshotBuild } } }),
            (err: unknown) => stream.send({ message: { case: "build", value: { requestId, error: (err as Error).message } } }),
          );
        } else if (msg.message.case === "invalidate") {
          // Runs changed at the orchestrator: drop them from the run cache, then ack (the
          // gateway's change is answered only after this ack).
          const inv = msg.message.value;
          const scopes: Scope[] = [];
          for (const s of inv.scopes) {
            try {
              scopes.push(scopeFromLink(s));
            } catch {
              // a malformed scope cannot name a cached run
            }
          }
          // A scope it could not read may have changed: nothing is kept for it.
          const unread = scopes.length !== inv.scopes.length;
          this.onInvalidate?.(scopes, inv.all || unread, inv.keepForOutage && !unread);
          stream.send({ message: { case: "invalidated", value: { requestId: inv.requestId } } });
        }
      }
    } finally {
      clearInterval(beat);
      // Calls still in flight fail as unavailable: their callers retry them (unary, or on the next link).
      if (this.streamCalls === calls) this.streamCalls = undefined;
      calls?.close();
      if (this.sendPool === sendPool) this.sendPool = undefined;
      if (this.sendRecord === sendRecord) this.sendRecord = undefined;
      if (this.sendRunLive === sendRunLive) this.sendRunLive = undefined;
      if (this.sendRelayMsg === sendRelay) {
        this.sendRelayMsg = undefined;
        this.onLinkEnded?.();
      }
    }
  }

  close(): void {
    this.closed = true;
    this.abort.abort();
    this.setState("closed");
    this.client.close();
  }
}

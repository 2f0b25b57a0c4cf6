/**
 * Starts a sandbox sidecar: the pool, the link to the orchestrator (which reports whether
 * the pool can run code: at start, and whenever its threads can no longer (re)start or can
 * again, ./pool/pool-health.ts), the Sandbox gRPC service, gRPC health (SERVING while the
 * orchestrator link is up and the sidecar is not draining) and server reflection.
 * Importable: returns {address, drain(), close()}. A pool that cannot start fails the
 * start, unless `serveWithoutPool` (./pool/unavailable-pool.ts).
 *
 * Drain (SIGTERM/SIGINT): health goes NOT_SERVING at once and a new Exec is refused,
 * while Wait and BridgeCallback keep being served so runs in flight can finish; when
 * nothing is in flight, or the budget runs out (`drainDeadline`), the server, the link
 * and the pool stop.
 */
import { Sandbox } from "../gen/codemode/sandbox/v1/sandbox_pb.js";
import { DEFAULT_DRAIN_MS, DrainTracker } from "../protocol/drain.js";
import { bearerAuthorizer, tenantAuthorizer, type ClientSecurity, type ServerSecurity } from "../protocol/credentials.js";
import { Tenants } from "../shared/tenants.js";
import { windowedServer } from "../protocol/flow-window.js";
import { addService, bindServer, shutdownServer } from "../protocol/grpc-service.js";
import { ServingHealth } from "../protocol/health.js";
import { addReflection } from "../protocol/reflection.js";
import { formatHostPort, type HostPort } from "../shared/address.js";
import { newId } from "../shared/ids.js";
import type { Logger } from "../shared/logger.js";
import { ANSWER_DECODERS } from "./exec/answer-wire.js";
import { EVENT_ENCODERS } from "./exec/event-wire.js";
import { CallRegistry } from "./exec/call-registry.js";
import { createSandboxService } from "./exec-service.js";
import { TenantQuotas } from "./exec/tenant-quotas.js";
import { OrchestratorLink } from "./link/orchestrator-link.js";
import { POOL_STARTED } from "./pool/pool-health.js";
import type { ColocatedOrchestrator } from "../shared/colocated.js";
import type { SandboxPool } from "./pool/pool.js";
import { PoolStartError, startPool, warmOtherSurfaces, type SurfaceProbe } from "./pool/pool-start.js";
import { MCP_RUN_PROBE } from "./surfaces/mcp-run/probe.js";
import { unavailablePool } from "./pool/unavailable-pool.js";
import { RunResolver } from "./link/run-resolver.js";
import { prefetchRuns } from "./link/run-prefetch.js";
import { execSessionHandler } from "./exec-session.js";
import { SnapshotSealer, SNAPSHOT_KEY_ENV } from "./suspend/snapshot-seal.js";
import { tracingEnabled } from "../shared/tracing.js";
import { scopeKeyOf } from "../shared/scope.js";
import type { Registry } from "prom-client";

/** The surfaces warmed after the start, besides code mode (which the pool's start proves). */
const OTHER_SURFACE_PROBES: readonly SurfaceProbe[] = [{ surface: "tool_search" }, { surface: "mcp_run", task: MCP_RUN_PROBE }];

export type SandboxOptions = {
  listen: HostPort;
  /** The orchestrator's SidecarLink address. */
  orchestrator: string;
  /** The Sandbox port's TLS and the bearer token gateways must send; none: plaintext, open. */
  security?: ServerSecurity;
  /** How the link dials the orchestrator: TLS (or mTLS) and the sidecar link token. */
  linkSecurity?: ClientSecurity;
  threads?: number;
  execsPerWorker?: number;
  log: Logger;
  /** Seals snapshots; defaults to the keys in CODEMODE_SNAPSHOT_KEYS / CODEMODE_SNAPSHOT_KEY (or a random one). */
  sealer?: SnapshotSealer;
  /** True when no other sidecar shares the orchestrator (no warning about a per-process key). */
  singleSidecar?: boolean;
  /** Where to register the sidecar's Prometheus metrics (`--metrics-address`); none when absent. */
  metrics?: Registry;
  /**
   * The pool, already starting (./pool/pool-start.ts `startPool`, with `threads` and
   * `execsPerWorker`): `codemode start` starts it before loading the servers, so its
   * workers warm up meanwhile. Started here when absent.
   */
  pool?: Promise<SandboxPool>;
  /**
   * Return only once the orchestrator link is up (health SERVING), or this budget ran out
   * (then the link keeps trying, as always). `codemode start` sets it: its orchestrator is
   * in the same process, so the ready line comes with a working link, not a race between
   * the link's set-up and a gateway's first calls. Not waited for when absent.
   */
  awaitLinkMs?: number;
  /**
   * When the pool cannot start, serve anyway (`--serve-without-pool`): nothing runs code
   * (./pool/unavailable-pool.ts), Tool Search's structured tools are served, and the link
   * reports that this sidecar cannot run code. Without it, the start fails.
   */
  serveWithoutPool?: boolean;
  /**
   * The orchestrator, when it runs in this process (`codemode start`): while the link is
   * up to it, segment records are handed to it without the wire (../shared/colocated.ts).
   */
  colocated?: ColocatedOrchestrator;
  /** The tenants (`--tenants-file`): a gateway's token names its tenant. None: the one default tenant, and `security.token`. */
  tenants?: Tenants;
};

export type RunningSandbox = {
  address: string;
  sidecarId: string;
  /** Health goes NOT_SERVING and new Exec calls are refused, at once; idempotent. */
  startDrain(): void;
  /** Drains (up to `budgetMs` for what is in flight), then stops; idempotent. */
  drain(budgetMs?: number): Promise<void>;
  /** The same as drain. */
  close(budgetMs?: number): Promise<void>;
};

/** After the budget: how long cancelled runs get to send their result. */
/** After the drain budget: how long idle VMs get to suspend into the store before the rest is cancelled. */
const SUSPEND_SETTLE_MS = 3_000;
const CANCEL_SETTLE_MS = 5_000;
/** After the drain: how long open streams (health watches, reflection) get before they are cut. */
const FINAL_GRACE_MS = 1_000;

/** After start: when the codemode.run modules are fetched and the other surfaces warmed (well after a gateway's first exec, typically). */
const MCP_RUN_PREFETCH_MS = 1_000;

export const VERSION = "0.1.0";

export { PoolStartError } from "./pool/pool-start.js";

/** Resolves when the link is up, or after `budgetMs`. */
function linkUp(link: OrchestratorLink, budgetMs: number): Promise<void> {
  if (link.linkState === "up") return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, budgetMs);
    link.onStateChange((state) => {
      if (state !== "up") return;
      clearTimeout(timer);
      resolve();
    });
  });
}

export async function startSandbox(options: SandboxOptions): Promise<RunningSandbox> {
  const log = options.log;
  const tenants = options.tenants ?? Tenants.NONE;
  if (tenants.configured && options.security?.token !== undefined)
    throw new Error("a gateway bearer token and a tenants file cannot both be given: with a tenants file each tenant's token is its gateways' token");
  const sidecarId = newId("sc", 6);
  const poolOptions = {
    log,
    ...(options.threads !== undefined ? { threads: options.threads } : {}),
    ...(options.execsPerWorker !== undefined ? { execsPerWorker: options.execsPerWorker } : {}),
  };
  let pool: SandboxPool;
  let poolHealth = POOL_STARTED;
  /** A pool that started reports at runtime when its threads can no longer run code, and when they can again. */
  let runtimeHealth: SandboxPool["health"] | undefined;
  try {
    pool = await (options.pool ?? startPool(poolOptions));
    runtimeHealth = pool.health;
    poolHealth = runtimeHealth.current;
  } catch (err) {
    if (!options.serveWithoutPool || !(err instanceof PoolStartError)) throw err;
    pool = unavailablePool(err.message);
    poolHealth = { canRunCode: false, reason: err.message };
    log.warn(
      { reason: err.message },
      "serving without a sandbox pool (--serve-without-pool): exec, wait, tool_search_code and codemode.run fail with runtime_unavailable; tool_search, tool_describe and tool_call are served",
    );
  }
  // No channelz bookkeeping (nothing serves channelz here): grpc-js skips its per-call and per-message counters.
  const server = windowedServer({ "grpc.max_receive_message_length": 16 * 1024 * 1024, "grpc.enable_channelz": 0 }, log);
  const calls = new CallRegistry();
  // Answers for live calls here that a gateway sent to another sidecar arrive over the link.
  const port = await bindServer(server, options.listen.host, options.listen.port, options.security?.tls).catch(async (err: unknown) => {
    await pool.close().catch(() => undefined);
    throw err;
  });
  const address = formatHostPort({ host: options.listen.host, port });
  const link = new OrchestratorLink(
    options.orchestrator,
    { sidecarId, address, version: VERSION },
    log.child({ sidecarId }),
    options.linkSecurity,
    poolHealth,
    options.colocated,
  );
  runtimeHealth?.onChange((health) => link.setPoolHealth(health)); // now (it may have changed since), then each change
  link.onDeliver = (scope, callId, answer) => {
    try {
      return calls.answerLive(callId, scopeKeyOf(scope), answer);
    } catch {
      return false; // another scope's call, or answered already: the routing sidecar explains it
    }
  };
  const resolver = new RunResolver(link, log.child({ sidecarId }));
  const sealer = options.sealer ?? SnapshotSealer.fromEnv();
  if (!sealer.shared && !options.singleSidecar) {
    log.warn(
      { sidecarId },
      `${SNAPSHOT_KEY_ENV} is not set: runs suspended here can be resumed only by this sidecar process; set the same key on every sidecar so any replica can serve wait`,
    );
  }
  const drain = new DrainTracker();
  const health = new ServingHealth([Sandbox.typeName]);
  const refreshHealth = () => health.set(link.linkState === "up" && !drain.draining);
  link.onStateChange(refreshHealth);
  health.addToServer(server);
  addReflection(server, [Sandbox]);
  // With a tenants file: each tenant's local quotas, and its weight in the pool's CPU share.
  const quotas = tenants.configured ? new TenantQuotas(tenants) : undefined;
  if (tenants.configured) pool.setTenantWeights((tenant) => tenants.quotas(tenant).weight ?? 1);
  const service = createSandboxService({ pool, resolver, calls, link, sealer, log: log.child({ sidecarId }), drain, ...(quotas ? { quotas } : {}) });
  // Metrics and traces are loaded only when configured (no cost otherwise).
  const metrics = options.metrics ? new (await import("./metrics.js")).SandboxMetrics(options.metrics, { pool, link, calls, resolver }) : undefined;
  if (metrics && options.metrics && quotas) metrics.watchTenants(options.metrics, tenants, quotas, pool);
  const instrumented = metrics || tracingEnabled() ? (await import("./instrument.js")).instrumentSandbox(service.handlers, metrics) : service.handlers;
  // ExecSession runs the (instrumented) Exec, Wait and BridgeCallback handlers on one stream.
  const handlers = { ...instrumented, execSession: execSessionHandler(instrumented) };
  const token = options.security?.token;
  // Large answers stay bytes until the handler has staged them to their VM (./exec/answer-wire.ts);
  // a nested call's event and an answer's response are encoded without protobuf-es (./exec/event-wire.ts).
  const authorize = tenants.configured ? tenantAuthorizer(tenants) : token !== undefined ? bearerAuthorizer(token, "gateway bearer token") : undefined;
  addService(server, Sandbox, handlers, log, drain, authorize, {
    decoders: ANSWER_DECODERS,
    responseEncoders: EVENT_ENCODERS,
  });
  link.start(() => calls.liveCount);
  // The orchestrator in this process tells of each run it opens: this sidecar resolves it ahead of its first exec (./link/run-prefetch.ts).
  if (options.colocated) {
    const prefetch = prefetchRuns(resolver, log.child({ sidecarId }));
    options.colocated.onRunOpened((scope) => {
      if (!drain.draining && link.linkState === "up") prefetch(scope);
    });
  }
  if (options.awaitLinkMs) await linkUp(link, options.awaitLinkMs);
  // codemode.run's modules (ajv, acorn; ~35 ms) load on its first exec, off the start path;
  // fetched in the background a little after start, so that exec usually finds them. The
  // other surfaces' preludes are warmed then too (./pool/pool-start.ts).
  setTimeout(() => {
    void import("./surfaces/mcp-run/run-service.js").catch(() => undefined);
    if (runtimeHealth && !drain.draining) void warmOtherSurfaces(pool, log, OTHER_SURFACE_PROBES);
  }, MCP_RUN_PREFETCH_MS).unref();
  const tls = options.security?.tls ? (options.security.tls.clientCa ? "mtls" : "tls") : "plaintext";
  const linkTls = options.linkSecurity?.tls ? (options.linkSecurity.tls.cert ? "mtls" : "tls") : "plaintext";
  log.info(
    {
      address,
      sidecarId,
      threads: pool.threads,
      orchestrator: options.orchestrator,
      tls,
      token: token !== undefined,
      ...(tenants.configured ? { tenants: tenants.names } : {}),
      link: { tls: linkTls, token: options.linkSecurity?.token !== undefined },
      malloc: { arenaMax: process.env.MALLOC_ARENA_MAX ?? "unset", mmapThreshold: process.env.MALLOC_MMAP_THRESHOLD_ ?? "unset" },
    },
    "sandbox listening",
  );

  /**
   * The drain budget ran out with execs or waits still running: they are cancelled (each
   * gets a `failed` result). The one place to change what happens to them instead, e.g.
   * suspend them into the store and return them as `waiting`.
   */
  const drainDeadline = async () => {
    // Idle VMs (awaiting tool answers) suspend into the store and their gateways get
    // `waiting`: with a shared store any sidecar continues them. What still computes is
    // cancelled after a short settle.
    service.suspendInFlight();
    if (await drain.idle(SUSPEND_SETTLE_MS)) return;
    service.cancelInFlight("this sidecar is shutting down and its drain budget ran out");
  };

  const startDrain = () => {
    if (!drain.begin()) return;
    refreshHealth();
    log.info({ sidecarId, inFlight: drain.inFlight }, "draining: health NOT_SERVING, new execs refused");
  };
  let stopped: Promise<void> | undefined;
  const stop = (budgetMs: number) =>
    (stopped ??= (async () => {
      startDrain();
      if (!(await drain.idle(budgetMs))) {
        log.warn({ sidecarId, inFlight: drain.inFlight, budgetMs }, "drain budget ran out; cancelling what is still running");
        await drainDeadline();
        await drain.idle(CANCEL_SETTLE_MS);
      } else log.info({ sidecarId, budgetMs }, "drained: every call in flight finished within the budget");
      await shutdownServer(server, FINAL_GRACE_MS);
      options.colocated?.onRunOpened(undefined);
      link.close();
      await pool.close();
      log.info({ sidecarId }, "sandbox stopped");
    })());
  return { address, sidecarId, startDrain, drain: (budgetMs = DEFAULT_DRAIN_MS) => stop(budgetMs), close: (budgetMs = DEFAULT_DRAIN_MS) => stop(budgetMs) };
}

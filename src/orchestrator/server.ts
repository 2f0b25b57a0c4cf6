/**
 * Starts the orchestrator: the Control service for gateways and the SidecarLink
 * service for sidecars, each on its own gRPC server and port with its own credentials
 * (TLS or mTLS, a bearer token), so a gateway's credentials cannot call SidecarLink and a
 * sidecar's cannot call Control; with its suspended-run store, catalogs and
 * open runs (in memory, or all in Redis when `store` is a redis:// URL, so replicas
 * share them and a restart keeps them), plus gRPC health on both ports and server
 * reflection (Control) on the Control port. With a tenants file, a gateway's token names its
 * tenant, and every tenant has state of its own (./tenants/).
 * Importable: returns {address, linkAddress, drain(), close()}. Drain: health goes NOT_SERVING at
 * once while Control and SidecarLink keep serving (draining sidecars still store their
 * runs) until no call is in flight or the budget runs out.
 */
import { Control } from "../gen/codemode/orchestrator/v1/control_pb.js";
import { SidecarLink } from "../gen/codemode/orchestrator/v1/link_pb.js";
import { DEFAULT_DRAIN_MS, DrainTracker } from "../protocol/drain.js";
import { bearerAuthorizer, tenantAuthorizer, type ServerSecurity } from "../protocol/credentials.js";
import { windowedServer } from "../protocol/flow-window.js";
import { addService, bindServer, shutdownServer } from "../protocol/grpc-service.js";
import { ServingHealth } from "../protocol/health.js";
import { addReflection } from "../protocol/reflection.js";
import { formatHostPort, type HostPort } from "../shared/address.js";
import { newId } from "../shared/ids.js";
import type { Logger } from "../shared/logger.js";
import { controlHandlers } from "./control-service.js";
import { linkHandlers, type AttachedSidecar } from "./link/link-service.js";
import type { RecordSegmentRequest } from "../gen/codemode/orchestrator/v1/link_pb.js";
import type { ColocatedOrchestrator } from "../shared/colocated.js";
import type { Scope } from "../shared/scope.js";
import type { LinkCallHandlers } from "./link/link-calls.js";
import { LiveForwarder } from "./link/live-forward.js";
import { createReplayRecords } from "./replay/create-replay-records.js";
import { ReplayCheck } from "./replay/replay-check.js";
import { createTenantStates } from "./tenants/tenant-state.js";
import type { StoreQuota } from "./tenants/store-quotas.js";
import { byCallerTenant, byRequestTenant } from "./tenants/tenant-dispatch.js";
import { Tenants } from "../shared/tenants.js";
import { RunCachePush } from "./link/run-cache-push.js";
import { SidecarPools } from "./link/sidecar-pools.js";
import { WaitRelays } from "./link/wait-relays.js";
import { LiveRuns, markVanished } from "./link/live-runs.js";
import { ClaimRelease } from "./link/claim-release.js";
import { suspendedRunHandlers } from "./suspended/suspended-runs.js";
import { sessionLinkHandlers } from "./sessions/session-handlers.js";
import { DEFAULT_STORE_TIMEOUT_MS, setStoreTimeout, storeCall, storeOutage } from "./state/store-failure.js";
import type { Registry } from "prom-client";

export type OrchestratorOptions = {
  /** The Control port (gateways). */
  listen: HostPort;
  /** The SidecarLink port (sidecars). */
  linkListen: HostPort;
  /** The Control port's TLS and the bearer token gateways must send; none: plaintext, open. */
  security?: ServerSecurity;
  /** The SidecarLink port's TLS and the bearer token sidecars must send (must differ from the gateways'). */
  linkSecurity?: ServerSecurity;
  log: Logger;
  /** "memory" (default) or a redis:// URL. */
  store?: string;
  /** Cap on unexpired suspended runs (64 by default). */
  maxSuspendedRuns?: number;
  /** The longest one store call may take (`--store-timeout-ms`, 2000 by default): then it fails UNAVAILABLE. */
  storeTimeoutMs?: number;
  /** Where to register the orchestrator's Prometheus metrics (`--metrics-address`); none when absent. */
  metrics?: Registry;
  /** The tenants (`--tenants-file`): a gateway's token names its tenant. None: the one default tenant, and `security.token`. */
  tenants?: Tenants;
  /** Replay every code-mode run that finishes and log the verdict (`--replay-check`, docs/replay.md). */
  replayCheck?: boolean;
};

export const DEFAULT_MAX_SUSPENDED_RUNS = 64;
/** How often a store that cannot be reached is asked whether it is back. */
const STORE_PROBE_MS = 1_000;

export type RunningOrchestrator = {
  /** The Control port. */
  address: string;
  /** The SidecarLink port. */
  linkAddress: string;
  /** Health goes NOT_SERVING at once; the services keep serving. Idempotent. */
  startDrain(): void;
  /** Drains (up to `budgetMs` for calls in flight), then stops; idempotent. */
  drain(budgetMs?: number): Promise<void>;
  /** The same as drain. */
  close(budgetMs?: number): Promise<void>;
  /** For a sidecar started in this process and attached to this orchestrator (../shared/colocated.ts). */
  colocated: ColocatedOrchestrator;
};

/** After the drain: how long open streams (sidecar links, health watches) get before they are cut. */
const FINAL_GRACE_MS = 1_000;

export async function startOrchestrator(options: OrchestratorOptions): Promise<RunningOrchestrator> {
  const log = options.log;
  const controlToken = options.security?.token;
  const linkToken = options.linkSecurity?.token;
  const tenants = options.tenants ?? Tenants.NONE;
  if (tenants.configured && controlToken !== undefined)
    throw new Error("a gateway bearer token and a tenants file cannot both be given: with a tenants file each tenant's token is its gateways' token");
  if (controlToken !== undefined && controlToken === linkToken)
    throw new Error("the sidecar link token must differ from the gateways' bearer token: a gateway's credentials must not open the link");
  const orchestratorId = newId("orch", 6);
  const sidecars = new Map<string, AttachedSidecar>();
  const localRecords = new Map<string, (req: RecordSegmentRequest) => void>();
  let runOpened: ((scope: Scope) => void) | undefined;
  const colocated: ColocatedOrchestrator = {
    orchestratorId,
    record(sidecarId, req) {
      const enqueue = localRecords.get(sidecarId);
      if (!enqueue) return false;
      enqueue(req);
      return true;
    },
    onRunOpened(listener) {
      runOpened = listener;
    },
  };
  const storeTimeout = options.storeTimeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
  setStoreTimeout(storeTimeout);
  const states = await createTenantStates(options.store, tenants, log, storeTimeout);
  // Replay records (docs/replay.md), keyed by scope and so by tenant, each tenant's bounded (maxReplayBytes).
  const replays = await createReplayRecords(options.store, log, storeTimeout, tenants).catch(async (err: unknown) => {
    await states.close();
    throw err;
  });
  const replayCheck = options.replayCheck ? new ReplayCheck(replays.records, log.child({ replayCheck: true })) : undefined;
  // The suspended-run store health and metrics look at: every tenant's shares one connection.
  const store = states.all[0]!.store;
  const maxSuspendedRuns = options.maxSuspendedRuns ?? DEFAULT_MAX_SUSPENDED_RUNS;
  const server = windowedServer({ "grpc.max_receive_message_length": 64 * 1024 * 1024 }, log);
  const linkServer = windowedServer({ "grpc.max_receive_message_length": 64 * 1024 * 1024 }, log);
  const drain = new DrainTracker();
  // One set of statuses for the process, answered on both ports (health stays open: no token).
  const health = new ServingHealth([Control.typeName, SidecarLink.typeName]);
  health.addToServer(server);
  health.addToServer(linkServer);
  addReflection(server, [Control]);
  // Loaded only when metrics are configured.
  const metrics = options.metrics ? new (await import("./metrics.js")).OrchestratorMetrics(options.metrics, { states, sidecars, log }) : undefined;
  if (metrics && options.metrics && tenants.configured) metrics.watchTenants(options.metrics, states);
  // Sidecars cache resolved runs; on a shared store, invalidations reach every replica through it.
  const bus = states.connection ? new (await import("./link/run-cache-bus.js")).RunCacheBus(states.connection, orchestratorId, log) : undefined;
  const cache = new RunCachePush(bus);
  // Whether attached sidecars can run code: Tool Search's mode code falls back to mode tools while none can.
  const pools = new SidecarPools(log);
  // Only while sidecars may cache resolved runs: the colocated sidecar resolves an opened run ahead of its first exec.
  const opened = (scope: Scope) => {
    if (!cache.cacheable) return;
    try {
      runOpened?.(scope);
    } catch (err) {
      log.warn({ err }, "the colocated sidecar's run-opened listener threw; ignored");
    }
  };
  const live = new LiveForwarder();
  // A sidecar that is gone holds no run: its waits' and checkpoints' claims end in every tenant's store.
  // Runs a gone sidecar ran that were never stored: a wait for one is told it was lost.
  const liveRuns = new LiveRuns();
  const claims = new ClaimRelease(async (sidecarId) => {
    await markVanished(liveRuns.take(sidecarId), (tenant) => states.get(tenant).store, log);
    const counts = await Promise.all(states.all.map((t) => storeCall(log, "release a gone sidecar's claims", () => t.store.releaseHolder(sidecarId))));
    return counts.reduce((a, b) => a + b, 0);
  }, log);
  // Each tenant's handlers over its own state; with one tenant (no tenants file), they are served as they are.
  const perTenant = new Map(
    states.all.map((t) => {
      const tlog = tenants.configured ? log.child({ tenant: t.tenant }) : log;
      const control = controlHandlers({ ...t, log: tlog, cache, pools, opened, tenant: t.tenant, replays: replays.records });
      const link = {
        ...suspendedRunHandlers({
          store: t.store,
          maxSuspendedRuns,
          log: tlog,
          live,
          // A tenant's quotas on its suspended runs, enforced by its store for every sidecar and replica.
          ...(tenants.configured
            ? { quota: { tenant: t.tenant, quotas: tenants.quotas(t.tenant), refused: (q: StoreQuota) => states.quotaRefused?.(t.tenant, q) } }
            : {}),
        }),
        ...sessionLinkHandlers(t.sessions, tlog, t.tenant),
      };
      return [t.tenant, { control, link }] as const;
    }),
  );
  const only = tenants.configured ? undefined : perTenant.values().next().value!;
  const control = only ? only.control : byCallerTenant(new Map([...perTenant].map(([t, h]) => [t, h.control])));
  const tenantLink = only ? only.link : byRequestTenant(new Map([...perTenant].map(([t, h]) => [t, h.link])));
  // Calls a sidecar sends on its Attach stream go to the handlers as served (with metrics).
  let served: LinkCallHandlers = {};
  const link = {
    ...linkHandlers({
      stateOf: (t) => states.get(t),
      live,
      orchestratorId,
      log,
      sidecars,
      cache,
      pools,
      calls: () => served,
      drain,
      localRecords,
      replays: replays.records,
      ...(replayCheck ? { replayCheck } : {}),
      claims,
      relays: new WaitRelays(log, (sidecarId) => pools.canRunCode(sidecarId)),
      liveRuns,
    }),
    ...tenantLink,
  };
  const controlAuth = tenants.configured
    ? tenantAuthorizer(tenants)
    : controlToken !== undefined
      ? bearerAuthorizer(controlToken, "gateway bearer token")
      : undefined;
  const linkAuth = linkToken !== undefined ? bearerAuthorizer(linkToken, "sidecar link token") : undefined;
  addService(server, Control, metrics ? metrics.countRequests(Control, control) : control, log, drain, controlAuth);
  const linkService = metrics ? metrics.countRequests(SidecarLink, metrics.watchSuspendedRuns(link)) : link;
  served = linkService;
  addService(linkServer, SidecarLink, linkService, log, drain, linkAuth);
  const closeStores = async () => {
    await bus?.close();
    await Promise.all([states.close(), replays.close()]);
  };
  let port: number;
  let linkPort: number;
  try {
    port = await bindServer(server, options.listen.host, options.listen.port, options.security?.tls);
    linkPort = await bindServer(linkServer, options.linkListen.host, options.linkListen.port, options.linkSecurity?.tls).catch((err: unknown) => {
      server.forceShutdown();
      throw new Error(`the sidecar link port ${formatHostPort(options.linkListen)}: ${(err as Error).message}`);
    });
  } catch (err) {
    await closeStores();
    throw err;
  }
  const address = formatHostPort({ host: options.listen.host, port });
  const linkAddress = formatHostPort({ host: options.linkListen.host, port: linkPort });
  health.set(true);
  // NOT_SERVING while the store cannot be reached; meanwhile it is asked every second, so
  // its return is noticed even when no call needs it.
  let storeProbe: NodeJS.Timeout | undefined;
  const ping = "ping" in store && typeof store.ping === "function" ? () => (store.ping as () => Promise<unknown>)() : undefined;
  const offStore = storeOutage.onChange((down) => {
    health.set(!down && !drain.draining);
    clearInterval(storeProbe);
    if (down && ping) storeProbe = setInterval(() => void storeCall(log, "reach the store", ping, { probe: true }).catch(() => {}), STORE_PROBE_MS).unref();
  });
  const security = (s?: ServerSecurity) => ({ tls: s?.tls ? (s.tls.clientCa ? "mtls" : "tls") : "plaintext", token: s?.token !== undefined });
  log.info(
    {
      address,
      linkAddress,
      orchestratorId,
      store: store.kind,
      maxSuspendedRuns,
      control: security(options.security),
      link: security(options.linkSecurity),
      ...(tenants.configured ? { tenants: tenants.names } : {}),
    },
    "orchestrator listening",
  );
  const startDrain = () => {
    if (!drain.begin()) return;
    health.set(false);
    log.info({ orchestratorId, inFlight: drain.inFlight }, "draining: health NOT_SERVING");
  };
  let stopped: Promise<void> | undefined;
  const stop = (budgetMs: number) =>
    (stopped ??= (async () => {
      startDrain();
      if (!(await drain.idle(budgetMs)))
        log.warn({ orchestratorId, inFlight: drain.inFlight, budgetMs }, "drain budget ran out; stopping with calls in flight");
      await Promise.all([shutdownServer(server, FINAL_GRACE_MS), shutdownServer(linkServer, FINAL_GRACE_MS)]);
      // --replay-check: the runs that finished before the stop are replayed, within the budget.
      if (replayCheck && !(await replayCheck.idle(budgetMs))) log.warn({ budgetMs }, "drain budget ran out; some finished runs were not replay-checked");
      offStore();
      clearInterval(storeProbe);
      claims.close();
      await closeStores();
      log.info("orchestrator stopped");
    })());
  return {
    address,
    linkAddress,
    startDrain,
    drain: (budgetMs = DEFAULT_DRAIN_MS) => stop(budgetMs),
    close: (budgetMs = DEFAULT_DRAIN_MS) => stop(budgetMs),
    colocated,
  };
}

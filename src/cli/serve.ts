/**
 * `codemode start | sandbox | orchestrator`: reads flags, starts processes, wires signals
 * (SIGTERM/SIGINT drain each process within `--drain-timeout-ms`, then exit 0).
 * Transport security (TLS, mTLS, bearer tokens, the link's own port) comes from
 * ./security-flags.ts.
 *
 * Start-up order is chosen for time to the ready line: the sandbox pool starts first (its
 * worker threads load, compile the guest preludes and run the probe on their own threads)
 * while this thread loads the server modules, imported only here, and starts the
 * orchestrator; the sidecar binds once both are done.
 */
import { randomBytes } from "node:crypto";
import { parseArgs } from "node:util";
import type { ServerTls } from "../protocol/credentials.js";
import { DEFAULT_DRAIN_MS } from "../protocol/drain.js";
import { DEFAULT_LINK_ADDRESS, DEFAULT_ORCHESTRATOR_ADDRESS, DEFAULT_SANDBOX_ADDRESS, parseHostPort } from "../shared/address.js";
import { createLogger } from "../shared/logger.js";
import type { SandboxPool } from "../sandbox/pool/pool.js";
import { startTracing } from "../shared/tracing.js";
import { codeCacheRefreshMs, launchState } from "../shared/launch-state.js";
import type { Logger } from "../shared/logger.js";
import {
  linkClientSecurity,
  linkClientSecurityFlags,
  linkServerSecurityFlags,
  serverSecurity,
  serverSecurityFlags,
  tenantsFlags,
  tenantsOf,
} from "./security-flags.js";
import { onShutdown } from "./signals.js";

function intFlag(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${flag} must be a positive integer, got ${JSON.stringify(value)}`);
  return n;
}

/**
 * One line as the ready line goes out: how long the start took, and how the code was loaded
 * (../shared/bundle-runner.ts). A bundle whose code cache V8 refused (other V8 flags) or that
 * had none writes one for this process's flags a while later, for the next start.
 */
function logStarted(log: Logger): void {
  const { bundle, codeCache, flavour, refreshCodeCache } = launchState();
  log.info({ startupMs: Math.round(performance.now()), bundle, codeCache, ...(flavour ? { nodeOptionsDigest: flavour } : {}) }, "started");
  if (!refreshCodeCache) return;
  setTimeout(() => {
    const r = refreshCodeCache();
    if ("wrote" in r) log.info({ file: r.wrote }, "wrote a code cache for this process's V8 flags: the next start with them uses it");
    else log.info({ reason: r.failed }, "could not write a code cache for this process's V8 flags (build with the same NODE_OPTIONS to have one)");
  }, codeCacheRefreshMs()).unref();
}

const drainFlags = {
  "drain-timeout-ms": { type: "string" },
} as const;

/** `--drain-timeout-ms`: how long a stopping process serves what is in flight (0 allowed). */
function drainBudget(values: { "drain-timeout-ms"?: string | undefined }): number {
  const v = values["drain-timeout-ms"];
  if (v === undefined) return DEFAULT_DRAIN_MS;
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new Error(`--drain-timeout-ms must be a non-negative integer, got ${JSON.stringify(v)}`);
  return n;
}

const metricsFlags = {
  "metrics-address": { type: "string" },
} as const;

/**
 * `--metrics-address HOST:PORT`: a Prometheus registry and its HTTP server, started
 * before anything else so a taken port fails fast; none without the flag.
 */
async function metricsFor(values: { "metrics-address"?: string | undefined }, log: Logger, tls?: ServerTls) {
  const v = values["metrics-address"];
  if (v === undefined) return { registry: undefined, ready: "", close: async () => {} };
  const listen = parseHostPort(v, "--metrics-address");
  const { createMetricsRegistry, startMetricsServer } = await import("./metrics-server.js");
  const registry = createMetricsRegistry();
  const server = await startMetricsServer(registry, listen, log, tls);
  return { registry, ready: ` metrics=${server.address}`, close: () => server.close() };
}

const poolFlags = {
  threads: { type: "string" },
  "execs-per-worker": { type: "string" },
  // A pool that cannot start: serve what needs no VM and report it (../sandbox/pool/unavailable-pool.ts) instead of exiting 1.
  "serve-without-pool": { type: "boolean" },
} as const;

const storeFlags = {
  store: { type: "string" },
  "max-suspended-runs": { type: "string" },
  "store-timeout-ms": { type: "string" },
  // Replay every code-mode run that finishes and log the verdict (docs/replay.md); also CODEMODE_REPLAY_CHECK=1.
  "replay-check": { type: "boolean" },
} as const;

/**
 * Starts the pool before anything else loads: resolves once its worker threads are
 * starting (they load and run the probe on their own threads from then on), with the
 * pool once the probe passed. startSandbox awaits that; a failure is a PoolStartError.
 */
async function launchPoolFirst(log: Logger, threads: number | undefined, perWorker: number | undefined): Promise<{ ready: Promise<SandboxPool> }> {
  const { launchPool } = await import("../sandbox/pool/pool-start.js");
  return launchPool({ log, ...(threads !== undefined ? { threads } : {}), ...(perWorker !== undefined ? { execsPerWorker: perWorker } : {}) });
}

function storeOptions(values: {
  store?: string | undefined;
  "max-suspended-runs"?: string | undefined;
  "store-timeout-ms"?: string | undefined;
  "replay-check"?: boolean | undefined;
}) {
  const max = intFlag(values["max-suspended-runs"], "--max-suspended-runs");
  const timeout = intFlag(values["store-timeout-ms"], "--store-timeout-ms");
  const replayCheck = values["replay-check"] === true || process.env.CODEMODE_REPLAY_CHECK === "1";
  return {
    ...(replayCheck ? { replayCheck } : {}),
    ...(values.store !== undefined ? { store: values.store } : {}),
    ...(max !== undefined ? { maxSuspendedRuns: max } : {}),
    ...(timeout !== undefined ? { storeTimeoutMs: timeout } : {}),
  };
}

export async function runStart(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      "sandbox-address": { type: "string", default: DEFAULT_SANDBOX_ADDRESS },
      "orchestrator-address": { type: "string", default: DEFAULT_ORCHESTRATOR_ADDRESS },
      // The embedded sidecar's link: a free loopback port unless given.
      "link-address": { type: "string", default: "127.0.0.1:0" },
      ...poolFlags,
      ...storeFlags,
      ...drainFlags,
      ...metricsFlags,
      ...serverSecurityFlags,
      ...linkServerSecurityFlags,
      ...linkClientSecurityFlags,
      ...tenantsFlags,
    },
    strict: true,
  });
  const log = createLogger("codemode");
  const threads = intFlag(values.threads, "--threads");
  const perWorker = intFlag(values["execs-per-worker"], "--execs-per-worker");
  const sandboxLog = log.child({ process: "sandbox" });
  // The pool first: its threads load and warm up while this one reads the rest of the configuration and loads the servers.
  const pool = (await launchPoolFirst(sandboxLog, threads, perWorker)).ready;
  const budget = drainBudget(values);
  const sandboxAt = parseHostPort(values["sandbox-address"], "--sandbox-address");
  const orchestratorAt = parseHostPort(values["orchestrator-address"], "--orchestrator-address");
  const linkAt = parseHostPort(values["link-address"], "--link-address");
  // The gateway ports (sandbox, Control, metrics) share one configuration; the link has its own.
  const security = serverSecurity(values, "");
  const tenants = await tenantsOf(values, security);
  const linkServer = serverSecurity(values, "link-");
  const linkClient = linkClientSecurity(values);
  if (linkServer.token === undefined) {
    // No link token configured: a per-process one, so nothing but this process's sidecar can attach.
    linkServer.token = linkClient.token = randomBytes(32).toString("base64url");
  }
  const servers = Promise.all([import("../orchestrator/server.js"), import("../sandbox/server.js")]);
  const metrics = await metricsFor(values, log, security.tls);
  const [{ startOrchestrator }, { startSandbox, VERSION }] = await servers;
  const tracing = await startTracing("codemode", VERSION, log);
  const orchestrator = await startOrchestrator({
    listen: orchestratorAt,
    linkListen: linkAt,
    security,
    linkSecurity: linkServer,
    log: log.child({ process: "orchestrator" }),
    ...storeOptions(values),
    ...(metrics.registry ? { metrics: metrics.registry } : {}),
    tenants,
  });
  // The check needs only the orchestrator: it runs while the sidecar waits for its pool
  // (./start-check.ts; loaded here, with gRPC already loaded, not on the way to starting the pool).
  const checked = import("./start-check.js").then((m) => m.startCheck(orchestrator.address, security, log, tenants.configured));
  const sandbox = await startSandbox({
    listen: sandboxAt,
    orchestrator: orchestrator.linkAddress,
    security,
    linkSecurity: linkClient,
    log: sandboxLog,
    // One process, one sidecar: a per-process key is enough unless one is configured.
    singleSidecar: true,
    // The orchestrator is in this process: ready comes with the link up (health SERVING).
    awaitLinkMs: 2_000,
    ...(metrics.registry ? { metrics: metrics.registry } : {}),
    ...(threads !== undefined ? { threads } : {}),
    ...(perWorker !== undefined ? { execsPerWorker: perWorker } : {}),
    pool,
    serveWithoutPool: values["serve-without-pool"] === true,
    colocated: orchestrator.colocated,
    tenants,
  });
  await checked;
  process.stdout.write(`ready sandbox=${sandbox.address} orchestrator=${orchestrator.address} link=${orchestrator.linkAddress}${metrics.ready}\n`);
  logStarted(log);
  onShutdown(log, async () => {
    // Both report NOT_SERVING at once; the orchestrator keeps serving while the sidecar drains.
    const started = Date.now();
    orchestrator.startDrain();
    await sandbox.drain(budget);
    await orchestrator.drain(Math.max(0, budget - (Date.now() - started)));
    await Promise.all([metrics.close(), tracing.shutdown()]);
  });
}

export async function runSandbox(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      "sandbox-address": { type: "string", default: DEFAULT_SANDBOX_ADDRESS },
      // The orchestrator's link port (its --link-address), not its Control port.
      "orchestrator-address": { type: "string", default: DEFAULT_LINK_ADDRESS },
      ...poolFlags,
      ...drainFlags,
      ...metricsFlags,
      ...serverSecurityFlags,
      ...linkClientSecurityFlags,
      ...tenantsFlags,
    },
    strict: true,
  });
  const log = createLogger("codemode-sandbox");
  const threads = intFlag(values.threads, "--threads");
  const perWorker = intFlag(values["execs-per-worker"], "--execs-per-worker");
  // The pool first, as for `start`.
  const pool = (await launchPoolFirst(log, threads, perWorker)).ready;
  const budget = drainBudget(values);
  const listen = parseHostPort(values["sandbox-address"], "--sandbox-address");
  parseHostPort(values["orchestrator-address"], "--orchestrator-address");
  const security = serverSecurity(values, "");
  const tenants = await tenantsOf(values, security);
  const linkSecurity = linkClientSecurity(values);
  const server = import("../sandbox/server.js");
  const metrics = await metricsFor(values, log, security.tls);
  const { startSandbox, VERSION } = await server;
  const tracing = await startTracing("codemode-sandbox", VERSION, log);
  const sandbox = await startSandbox({
    listen,
    orchestrator: values["orchestrator-address"],
    security,
    linkSecurity,
    log,
    ...(metrics.registry ? { metrics: metrics.registry } : {}),
    ...(threads !== undefined ? { threads } : {}),
    ...(perWorker !== undefined ? { execsPerWorker: perWorker } : {}),
    pool,
    serveWithoutPool: values["serve-without-pool"] === true,
    tenants,
  });
  process.stdout.write(`ready sandbox=${sandbox.address}${metrics.ready}\n`);
  logStarted(log);
  onShutdown(log, async () => {
    await sandbox.drain(budget);
    await Promise.all([metrics.close(), tracing.shutdown()]);
  });
}

export async function runOrchestrator(argv: string[]): Promise<void> {
  const { values } = parseArgs({
    args: argv,
    options: {
      "orchestrator-address": { type: "string", default: DEFAULT_ORCHESTRATOR_ADDRESS },
      "link-address": { type: "string", default: DEFAULT_LINK_ADDRESS },
      ...storeFlags,
      ...drainFlags,
      ...metricsFlags,
      ...serverSecurityFlags,
      ...linkServerSecurityFlags,
      ...tenantsFlags,
    },
    strict: true,
  });
  const budget = drainBudget(values);
  const listen = parseHostPort(values["orchestrator-address"], "--orchestrator-address");
  const linkListen = parseHostPort(values["link-address"], "--link-address");
  const security = serverSecurity(values, "");
  const tenants = await tenantsOf(values, security);
  const linkSecurity = serverSecurity(values, "link-");
  const log = createLogger("codemode-orchestrator");
  const metrics = await metricsFor(values, log, security.tls);
  const { startOrchestrator } = await import("../orchestrator/server.js");
  const orchestrator = await startOrchestrator({
    listen,
    linkListen,
    security,
    linkSecurity,
    log,
    ...storeOptions(values),
    ...(metrics.registry ? { metrics: metrics.registry } : {}),
    tenants,
  });
  process.stdout.write(`ready orchestrator=${orchestrator.address} link=${orchestrator.linkAddress}${metrics.ready}\n`);
  logStarted(log);
  onShutdown(log, async () => {
    await orchestrator.drain(budget);
    await metrics.close();
  });
}

/**
 * Starting the sandbox pool, proven able to run code, or the reason it cannot. Apart
 * from ../server.ts (which loads gRPC, the generated services and the exec service) so
 * `codemode start`/`sandbox` can start the pool first: its first worker thread loads and
 * warms up while the main thread loads the servers. The other threads start for their first
 * task, or warm up a moment after the pool is proven (DEFERRED_START_MS): on a small machine,
 * starting them with the first slowed the first and the main thread they share the cores with.
 */
import { SandboxPool, type PoolOptions } from "./pool.js";
import type { ExecEvents } from "./pool-contract.js";
import { EMPTY_GUEST_CATALOG, type ExecTask, type GuestCatalog, type TaskSurface } from "./task-protocol.js";
import type { Logger } from "../../shared/logger.js";
import { PROBE_LIMITS, PROBE_SOURCE } from "./lane-warmup.js";

/** The sandbox pool cannot start, so no surface can run: `codemode start`/`sandbox` print it and exit non-zero. */
export class PoolStartError extends Error {
  override name = "PoolStartError";
}

function startError(err: unknown): PoolStartError {
  const e = err as { code?: string; message?: string };
  const why =
    e.code === "ERR_ACCESS_DENIED"
      ? `worker threads are denied (${e.message}; with Node's permission model, allow them with --allow-worker)`
      : (e.message ?? String(err));
  return new PoolStartError(`the sandbox pool cannot start, so no code can run: ${why}`);
}

/**
 * Creates the pool and starts its probe (`probe`); resolves as soon as the
 * worker threads are starting, with `ready`: the pool once the probe passed, or a
 * PoolStartError (the pool closed). Never rejects itself; `ready` is always handled
 * (a caller that gives up before awaiting it leaves no unhandled rejection).
 */
export async function launchPool(options: PoolOptions): Promise<{ ready: Promise<SandboxPool> }> {
  let pool: SandboxPool;
  try {
    pool = await SandboxPool.create({ ...options, startThreads: options.startThreads ?? 1 });
  } catch (err) {
    const ready = Promise.reject(startError(err));
    ready.catch(() => undefined);
    return { ready };
  }
  const ready = probe(pool).then(
    () => {
      setTimeout(() => pool.startDeferred(), DEFERRED_START_MS).unref();
      return pool;
    },
    async (err: unknown) => {
      await pool.close().catch(() => undefined);
      throw startError(err);
    },
  );
  ready.catch(() => undefined);
  return { ready };
}

/** The pool, proven able to run a program on code mode's prelude on every thread, or why it cannot start. */
export async function startPool(options: PoolOptions): Promise<SandboxPool> {
  return (await launchPool(options)).ready;
}

/**
 * A surface's probe: PROBE_SOURCE (which returns 1) with the empty catalog, or what the
 * surface puts in their place (codemode.run reads its result from a global and needs its
 * module catalog). The server passes them in, so the pool knows no surface's prelude.
 */
export type SurfaceProbe = { surface: TaskSurface; task?: Partial<Pick<ExecTask, "source" | "contextJson">> & { catalog?: GuestCatalog } };

function probeOn(pool: SandboxPool, { surface, task: own }: SurfaceProbe): Promise<void> {
  const ignore: ExecEvents = { onOutput() {}, onToolCall() {}, onRequest() {}, onYield() {} };
  const task = {
    kind: "exec",
    source: PROBE_SOURCE,
    language: "javascript",
    limits: PROBE_LIMITS,
    catalog: EMPTY_GUEST_CATALOG,
    contextJson: "null",
    outputBytesUsed: 0,
    surface,
    ...own,
  } as const;
  return pool.exec(task, ignore).outcome.then((o) => {
    if (o.status !== "completed" || o.valueJson !== "1") throw new Error(o.status === "failed" ? o.error : `the probe program ended ${o.status}`);
  });
}

/**
 * Runs the probe program on code mode's prelude once per started thread (submitted together, so
 * each lands on a different one) and rejects with the reason when the pool cannot: workers that
 * never start, a prelude that does not compile, QuickJS that cannot create a VM. Bounded by the
 * task timeout. It also warms those workers for the first execs: each has compiled a cell and
 * prepared its VM image before the sidecar says it is ready, and the first exec there skips
 * that (~100 ms cold); a deferred thread runs the same probes as its warm-up
 * (./lane-warmup.ts). The other surfaces' preludes are warmed after the
 * start (`warmOtherSurfaces`): proving them here cost the ready line 40-70 ms.
 */
async function probe(pool: SandboxPool): Promise<void> {
  await Promise.all(Array.from({ length: pool.startedThreads }, () => probeOn(pool, { surface: "code" })));
}

/**
 * How long after the pool is proven its other threads start: past the ready line and a first
 * exec sent at once (docs/performance.md, "Start-up (stop 32)").
 */
export const DEFERRED_START_MS = 250;

/** How often `warmOtherSurfaces` looks again for an idle pool before it leaves the surfaces to warm at their first execs. */
const WARM_ATTEMPTS = 10;
const WARM_RETRY_MS = 1_000;

/**
 * Runs `probes` (the server passes Tool Search's and codemode.run's; the sidecar calls it a
 * second after its start, off the ready line), so their first execs find a compiled cell
 * and a prepared image. Only on an idle pool that can run code: a warm-up never queues
 * behind real execs or makes the pool add a thread; while the pool is busy it looks again
 * each second, ten times, then leaves each surface to warm at its first exec. A failure is
 * logged: that surface's execs would fail the same way, while code mode goes on.
 */
export async function warmOtherSurfaces(pool: SandboxPool, log: Logger, probes: readonly SurfaceProbe[], attempt = 1): Promise<void> {
  if (pool.load > 0 || pool.health.refusal() !== undefined) {
    if (attempt < WARM_ATTEMPTS) setTimeout(() => void warmOtherSurfaces(pool, log, probes, attempt + 1), WARM_RETRY_MS).unref();
    return;
  }
  await Promise.all(
    probes.map((probe) => {
      const surface = probe.surface;
      return probeOn(pool, probe).then(
        () => log.debug({ surface }, "surface warmed"),
        (err: unknown) => log.error({ surface, reason: (err as Error).message }, "a surface's probe failed: its execs will fail the same way"),
      );
    }),
  );
}

/**
 * Starting the sandbox pool, proven able to run code, or the reason it cannot. Apart
 * from ./server.ts (which loads gRPC, the generated services and the exec service) so
 * `codemode start`/`sandbox` can start the pool first: its worker threads load and warm
 * up while the main thread loads the servers.
 */
import { SandboxPool, type PoolOptions } from "./pool.js";
import type { ExecEvents } from "./pool-contract.js";
import { MCP_RUN_PROBE } from "./mcp-run/probe.js";
import { EMPTY_GUEST_CATALOG } from "./task-protocol.js";
import { PROBE_LIMITS } from "./lane-warmup.js";

/** The sandbox pool cannot start, so no surface can run: `codemode start`/`sandbox` print it and exit non-zero. */
export class PoolStartError extends Error {
  override name = "PoolStartError";
}

function startError(err: unknown): PoolStartError {
  const e = err as { code?: string; message?: string };
  const why = e.code === "ERR_ACCESS_DENIED" ? `worker threads are denied (${e.message}; with Node's permission model, allow them with --allow-worker)` : (e.message ?? String(err));
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
    pool = await SandboxPool.create(options);
  } catch (err) {
    const ready = Promise.reject(startError(err));
    ready.catch(() => undefined);
    return { ready };
  }
  const ready = probe(pool).then(
    () => pool,
    async (err: unknown) => {
      await pool.close().catch(() => undefined);
      throw startError(err);
    },
  );
  ready.catch(() => undefined);
  return { ready };
}

/** The pool, proven able to run a program on every guest prelude, or why it cannot start. */
export async function startPool(options: PoolOptions): Promise<SandboxPool> {
  return (await launchPool(options)).ready;
}

/**
 * Runs `return 1` on each guest prelude (code mode's, Tool Search's, codemode.run's) and
 * rejects with the reason when the pool cannot: workers that never start, a prelude
 * that does not compile, QuickJS that cannot create a VM. Bounded by the task timeout.
 *
 * It also warms the pool for the first execs: code mode's probe runs once per thread
 * (submitted first, so each lands on a different one), so every worker has compiled
 * that prelude and prepared its VM image before the sidecar says it is ready, and the
 * first exec on any thread skips that (~100 ms cold). The other surfaces run once each.
 */
async function probe(pool: SandboxPool): Promise<void> {
  const limits = PROBE_LIMITS;
  const ignore: ExecEvents = { onOutput() {}, onToolCall() {}, onRequest() {}, onYield() {} };
  const surfaces = [...Array.from({ length: pool.threads }, () => "code" as const), "tool_search" as const, "mcp_run" as const];
  const outcomes = await Promise.all(
    surfaces.map(
      (surface) =>
        pool.exec({ kind: "exec", source: "return 1", language: "javascript", limits, catalog: EMPTY_GUEST_CATALOG, contextJson: "null", outputBytesUsed: 0, surface, ...(surface === "mcp_run" ? MCP_RUN_PROBE : {}) }, ignore).outcome,
    ),
  );
  for (const o of outcomes) if (o.status !== "completed" || o.valueJson !== "1") throw new Error(o.status === "failed" ? o.error : `the probe program ended ${o.status}`);
}

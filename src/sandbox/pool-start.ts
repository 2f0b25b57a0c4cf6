/**
 * Starting the sandbox pool, proven able to run code, or the reason it cannot. Apart
 * from ./server.ts (which loads gRPC, the generated services and the exec service) so
 * `codemode start`/`sandbox` can start the pool first: its worker threads load and warm
 * up while the main thread loads the servers.
 */
import { SandboxPool, type PoolOptions } from "./pool.js";

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
 * Creates the pool and starts its probe (SandboxPool.probe); resolves as soon as the
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
  const ready = pool.probe().then(
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

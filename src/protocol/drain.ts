/**
 * Graceful drain of a gRPC server. The adapter reports every unary and server-streaming
 * call here (bidi streams are standing links, not work), so a process told to stop can
 * keep serving the calls it already has (and the ones that finish them: tool answers,
 * waits) while it refuses new work and reports NOT_SERVING, and knows when nothing is
 * left in flight.
 */

/** How long a stopping process serves what is in flight (`--drain-timeout-ms`). */
export const DEFAULT_DRAIN_MS = 10_000;
export class DrainTracker {
  private active = 0;
  private started = false;
  private readonly idleWaiters = new Set<() => void>();

  /** True once the drain began; it never ends (the process is stopping). */
  get draining(): boolean {
    return this.started;
  }

  get inFlight(): number {
    return this.active;
  }

  /** Starts the drain; false when it had already started. */
  begin(): boolean {
    if (this.started) return false;
    this.started = true;
    return true;
  }

  /** A call started; the returned function ends it (once). */
  enter(): () => void {
    this.active++;
    let left = false;
    return () => {
      if (left) return;
      left = true;
      this.active--;
      if (this.active === 0) for (const wake of [...this.idleWaiters]) wake();
    };
  }

  /** Resolves true when no tracked call is in flight, false when `budgetMs` passes first. */
  idle(budgetMs: number): Promise<boolean> {
    if (this.active === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const done = (idle: boolean) => {
        clearTimeout(timer);
        this.idleWaiters.delete(wake);
        resolve(idle);
      };
      const wake = () => done(true);
      const timer = setTimeout(() => done(false), Math.max(0, budgetMs));
      this.idleWaiters.add(wake);
    });
  }
}

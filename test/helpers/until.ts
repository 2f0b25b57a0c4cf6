/**
 * The tests' one polling helper. Some states show only when asked (a log line that has
 * not crossed the pipe yet, a metric, a trajectory step, a health status, a thread in
 * /proc): `until` asks again every `everyMs` until `probe` answers something other than
 * `undefined` or `false`, and returns that answer. Its timeout bounds a wait for an
 * event, generously; no test asserts how long the wait took.
 */

export type UntilOptions = {
  /** How long to keep asking before failing (default 20 s). */
  ms?: number;
  /** Pause between two asks (default 50 ms). */
  everyMs?: number;
  /** More context for the failure message (e.g. a process's stderr, the last value seen). */
  detail?: () => string;
};

/** Asks `probe` until it answers other than `undefined`/`false`; `what` names the awaited state in the failure. */
export async function until<T>(
  probe: () => T | undefined | false | Promise<T | undefined | false>,
  what: string,
  options: number | UntilOptions = {},
): Promise<T> {
  const { ms = 20_000, everyMs = 50, detail } = typeof options === "number" ? { ms: options } : options;
  const end = Date.now() + ms;
  for (;;) {
    const seen = await probe();
    if (seen !== undefined && seen !== false) return seen;
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}${detail ? `\n${detail()}` : ""}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

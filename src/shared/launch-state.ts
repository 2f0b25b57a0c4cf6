/**
 * How this process's code was loaded (./bundle-runner.ts), for the start-up log line and
 * for the pool, which starts its worker threads from the worker bundle when the CLI runs
 * from its bundle.
 */
import type { CodeCacheState } from "./bundle-runner.js";

export type LaunchState = {
  /** used; absent (no bundle built); stale (tsc ran after the bundle); off (CODEMODE_BUNDLE=0, or not started by bin/codemode.js). */
  bundle: "used" | "absent" | "stale" | "off";
  codeCache: CodeCacheState | "none";
  /** A training start (scripts/bundle.mjs): write code caches as code runs. */
  training: boolean;
};

const KEY = Symbol.for("codemode.launch");

export function setLaunchState(state: LaunchState): void {
  (globalThis as Record<symbol, unknown>)[KEY] = state;
}

export function launchState(): LaunchState {
  return ((globalThis as Record<symbol, unknown>)[KEY] as LaunchState | undefined) ?? { bundle: "off", codeCache: "none", training: false };
}

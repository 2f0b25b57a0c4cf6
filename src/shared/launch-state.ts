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
  /** Node options' digest (./bundle-runner.ts `codeCacheFlavour`), for the worker bundle's cache. */
  flavour: string;
  /** When the cache was refused or missing: writes one for this process's V8 flags (./bundle-runner.ts `refresh`). */
  refreshCodeCache?: () => { wrote: string } | { failed: string };
};

const KEY = Symbol.for("codemode.launch");

export function setLaunchState(state: LaunchState): void {
  (globalThis as Record<symbol, unknown>)[KEY] = state;
}

export function launchState(): LaunchState {
  return ((globalThis as Record<symbol, unknown>)[KEY] as LaunchState | undefined) ?? { bundle: "off", codeCache: "none", training: false, flavour: "" };
}

/** How long after start a process whose code cache was refused or missing writes its own: CODEMODE_CODE_CACHE_REFRESH_MS, default 10 s. */
export function codeCacheRefreshMs(): number {
  const raw = process.env.CODEMODE_CODE_CACHE_REFRESH_MS?.trim();
  const v = raw ? Number(raw) : NaN;
  return Number.isInteger(v) && v >= 0 ? v : 10_000;
}

/**
 * The config keys' defaults and clamps, apart from the zod schema in ./config.ts, so a
 * module that needs only a number (the pool's workers) does not load zod.
 */
/** Seed defaults and clamps, in one table the README mirrors. */
export const LIMITS = {
  timeoutMs: { default: 10_000, min: 100, max: 60_000 },
  memoryLimitBytes: { default: 67_108_864, min: 1_048_576, max: 1_073_741_824 },
  maxOutputBytes: { default: 65_536, min: 1_024, max: 10_485_760 },
  maxSnapshotBytes: { default: 10_485_760, min: 1_024, max: 268_435_456 },
  maxPendingToolCalls: { default: 16, min: 1, max: 128 },
  snapshotTtlSeconds: { default: 900, min: 1, max: 86_400 },
  maxSearchLimit: { default: 50, min: 1, max: 50 },
  searchDefaultLimit: { default: 8, min: 1, max: 50 },
  maxToolCallsPerRun: { default: 1_000, min: 1, max: 100_000 },
  maxSearchesPerRun: { default: 1_000, min: 1, max: 100_000 },
  approvalTimeoutMs: { default: 600_000, min: 1_000, max: 86_400_000 },
  maxSessionValueBytes: { default: 65_536, min: 1, max: 1_048_576 },
  maxSessionKeys: { default: 256, min: 1, max: 4_096 },
  maxSessionBytes: { default: 1_048_576, min: 1_024, max: 16_777_216 },
  sessionTtlSeconds: { default: 604_800, min: 60, max: 7_776_000 },
  maxAwaitMs: { default: 300_000, min: 1_000, max: 3_600_000 },
  checkpointAfterMs: { default: 1_000, min: 100, max: 60_000 },
} as const;

/**
 * A test knob: a timing the product fixes (the CPU share's window, the orchestrator link's
 * keepalive) that tests shorten through an environment variable named `CODEMODE_TEST_…`,
 * so they do not wait it out. Not public config: the value is the product's, chosen with
 * what depends on it; the variable exists for tests only, and its name says so. Unset or
 * empty gives `limit.default`; an integer outside `[min, max]` is clamped, as config is;
 * anything else is refused with an error naming the variable and the value.
 */
export function testKnobMs(
  name: `CODEMODE_TEST_${string}`,
  limit: { readonly default: number; readonly min: number; readonly max: number },
  env: NodeJS.ProcessEnv = process.env,
): number {
  const raw = env[name]?.trim();
  if (!raw) return limit.default;
  const n = Number(raw);
  if (!Number.isInteger(n)) throw new Error(`${name} must be an integer number of milliseconds, got ${JSON.stringify(raw)}`);
  return Math.min(limit.max, Math.max(limit.min, n));
}

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
} as const;

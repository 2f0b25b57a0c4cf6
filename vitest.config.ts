// Two projects: unit tests (no process, no port) run files in parallel; integration tests
// start real processes on 127.0.0.1 port 0, Redis and Python, so they run one file at a
// time and get room on a shared 2-core machine. `npm test` runs unit, then integration.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: "forks",
    projects: [
      {
        extends: true,
        test: { name: "unit", include: ["test/unit/**/*.test.ts"] },
      },
      {
        extends: true,
        test: { name: "integration", include: ["test/integration/**/*.test.ts"], fileParallelism: false },
      },
    ],
  },
});

// Integration tests start real processes on 127.0.0.1 port 0; give them room on a
// shared 2-core machine, and run files one at a time so processes do not starve.
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    fileParallelism: false,
    pool: "forks",
  },
});

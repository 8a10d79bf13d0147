import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: "forks",
    // The suite waits far more than it computes (real servers, sockets, timers): one worker per
    // core — vitest's default of cores - 1 is a single worker on a 2-core machine — left both
    // cores idle half the time (297 s wall at 54 % of one core). Two workers per core measured
    // 123 s with every test passing; BEARER_PROXY_TEST_WORKERS overrides.
    maxWorkers: Number(
      process.env.BEARER_PROXY_TEST_WORKERS ?? Math.max(2, availableParallelism() * 2),
    ),
    reporters: ["default"],
    // Nothing is retried, in CI either; BEARER_PROXY_TEST_RETRY=N is for a local hunt. A test
    // that needs a second try is a flaky test to fix.
    retry: Number(process.env.BEARER_PROXY_TEST_RETRY ?? 0),
  },
});

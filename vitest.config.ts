import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: "forks",
    reporters: ["default"],
    // .ci/run sets BEARER_PROXY_TEST_RETRY=1: on a loaded CI machine one timing-bound test may
    // miss its deadline once; a real regression fails the retry too, and the report names every
    // retried test. Locally nothing is retried.
    retry: Number(process.env.BEARER_PROXY_TEST_RETRY ?? 0),
  },
});

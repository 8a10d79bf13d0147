/**
 * `BENCH_AA_CLI` (bench/README.md): the A/A variant runs another build's cli.js, on its first start
 * and on every `--fresh` restart, so a change's before/after alternates in the same rounds;
 * without it the variant runs the measured build.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";

type Started = { baseUrl: string; stop(): Promise<void> };
type Variant = { key: string };
const { BEARER_PROXY_VARIANTS, startVariant } = (await import(
  new URL("../../bench/lib/variants.mjs", import.meta.url).href
)) as {
  BEARER_PROXY_VARIANTS: Variant[];
  startVariant(options: {
    variant: Variant;
    dir: string;
    control: { send(): Promise<{ status: number; text: string }> };
    startProxy(configure: unknown, tag: string, env: unknown, cli?: string): Promise<Started>;
    otlpSink(): Promise<never>;
  }): Promise<{ restart(): Promise<void> }>;
};

const aa = BEARER_PROXY_VARIANTS.find((v) => v.key === "aa-plain")!;

async function clisStarted(): Promise<(string | undefined)[]> {
  const dir = mkdtempSync(join(tmpdir(), "bench-aa-"));
  const clis: (string | undefined)[] = [];
  try {
    const competitor = await startVariant({
      variant: aa,
      dir,
      control: { send: async () => ({ status: 200, text: "" }) },
      startProxy: async (_configure, _tag, _env, cli) => {
        clis.push(cli);
        return { baseUrl: "http://127.0.0.1:1", stop: async () => {} };
      },
      otlpSink: () => Promise.reject(new Error("not used")),
    });
    await competitor.restart();
    return clis;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("the A/A variant's build", () => {
  afterEach(() => {
    delete process.env.BENCH_AA_CLI;
  });

  it("is the measured one without BENCH_AA_CLI", async () => {
    expect(await clisStarted()).toEqual([undefined, undefined]);
  });

  it("is BENCH_AA_CLI's, on the first start and after a restart", async () => {
    process.env.BENCH_AA_CLI = "/elsewhere/dist/cli.js";
    expect(await clisStarted()).toEqual(["/elsewhere/dist/cli.js", "/elsewhere/dist/cli.js"]);
  });
});

/**
 * Issue 26, the app's pacers (src/pacing/pacers.ts): one per upstream, also without a rateLimit
 * (for the upstream's pauses); a reload keeps the pacer of unchanged settings with its queue and
 * budgets, builds new ones for changed settings, and `retain` closes what the live
 * configuration no longer uses. An upstream's pause holds the entry that got it, or (pauseScope:
 * credential) every entry spending its credential at its origin.
 */
import { describe, expect, it } from "vitest";
import { rulesNameCallers } from "../../src/callers/allow.js";
import type { UpstreamConfig } from "../../src/config/proxy-config.js";
import { createLogger } from "../../src/observability/logger.js";
import { createMetrics } from "../../src/observability/metrics.js";
import type { Admission } from "../../src/pacing/limiter.js";
import { PacerClosedError } from "../../src/pacing/limiter.js";
import { createPacers } from "../../src/pacing/pacers.js";
import { makeProxyConfig, makeUpstreamConfig } from "../helpers/upstream-config.js";

function setup() {
  const lines: Record<string, unknown>[] = [];
  const logger = createLogger({
    level: "info",
    format: "json",
    destination: { write: (line: string) => lines.push(JSON.parse(line)) },
  });
  const metrics = createMetrics({ collectProcessMetrics: false });
  const limited = (name: string, requests: number, extra = {}) =>
    makeUpstreamConfig(name, {
      baseUrl: "https://api.example.test",
      rateLimit: { requests, per: "1s", wait: "5s", ...extra },
    });
  const open = (name: string) => makeUpstreamConfig(name, { baseUrl: "https://api.example.test" });
  const config = (...upstreams: UpstreamConfig[]) => makeProxyConfig(upstreams);
  const pacers = createPacers(config(open("unused")), {
    logger,
    metrics,
    namesCallers: (upstream) => rulesNameCallers(upstream.allow),
  });
  return { pacers, metrics, lines, limited, open, config };
}

describe("the app's pacers", () => {
  it("gives every upstream a pacer; without a rateLimit it admits everything at once", async () => {
    const { pacers, limited, open, config } = setup();
    const table = pacers.tableFor(config(limited("reports", 2), open("files")));
    const reports = table.pacingFor("reports")!;
    const files = table.pacingFor("files")!;
    expect(reports.policy).toBe('"default";q=2;w=1');
    expect(files.policy).toBeUndefined();
    expect(files.pacer.acquire("files")).toMatchObject({ ok: true, waitedMs: 0 });
    expect(reports.pacer.acquire("reports")).toMatchObject({ ok: true });
    const waiting = reports.pacer.acquire("reports");
    expect(waiting).toBeInstanceOf(Promise);
    expect(table.pacingFor("missing")).toBeUndefined();
    void pacers.close();
    await expect(waiting).rejects.toBeInstanceOf(PacerClosedError);
  });

  it("keeps an unchanged upstream's pacer across a reload, queue and all; retain closes the rest", async () => {
    const { pacers, limited, config } = setup();
    const first = pacers.tableFor(config(limited("reports", 1), limited("old", 1)));
    const reports = first.pacingFor("reports")!;
    reports.pacer.acquire("reports");
    const waiting = reports.pacer.acquire("reports") as Promise<Admission>;
    const old = first.pacingFor("old")!;
    old.pacer.acquire("old");
    const oldWaiting = old.pacer.acquire("old") as Promise<Admission>;

    const second = pacers.tableFor(config(limited("reports", 1), limited("new", 3)));
    expect(second.pacingFor("reports")).toBe(reports);
    expect(second.statusOf("reports")).toMatchObject({ queued: 1 });
    // Requests of the old configuration still run: nothing closes until it is retired.
    expect(old.pacer.state().queued).toBe(1);
    pacers.retain([second]);
    await expect(oldWaiting).rejects.toBeInstanceOf(PacerClosedError);
    await expect(waiting).resolves.toMatchObject({ ok: true });

    // A changed limit is a new pacer.
    const third = pacers.tableFor(config(limited("reports", 2), limited("new", 3)));
    expect(third.pacingFor("reports")).not.toBe(reports);
    expect(third.pacingFor("new")).toBe(second.pacingFor("new"));
    void pacers.close();
  });

  it("pauses the entry that got the answer alone by default (pauseScope: upstream)", () => {
    const { pacers, open, config } = setup();
    const table = pacers.tableFor(config(open("a"), open("b")));
    table.pacingFor("a")!.slowDown(5_000, 429);
    expect(table.pacingFor("a")!.pacer.state()).toMatchObject({ pauseReason: "429" });
    // Same credential, same origin, another entry: not paused.
    expect(table.pacingFor("b")!.pacer.state()).toMatchObject({ pausedForMs: 0 });
    expect(table.statusOf("a")).toMatchObject({ limit: null, pause: { reason: "429" } });
    // Nothing to show for a quiet upstream without a limit.
    expect(table.statusOf("b")).toBeUndefined();
    void pacers.close();
  });

  it("with pauseScope: credential, pauses every entry with its credential at its origin, for at most its maxPause", () => {
    const { pacers, open, config } = setup();
    const sharing = (name: string, maxPause: string) =>
      makeUpstreamConfig(name, {
        baseUrl: "https://api.example.test",
        rateLimit: { pauseScope: "credential", maxPause },
      });
    const other = makeUpstreamConfig("other", {
      baseUrl: "https://api.example.test",
      tokenParams: { audience: "other" },
    });
    const table = pacers.tableFor(config(sharing("a", "30s"), open("b"), other));
    expect(table.pacingFor("a")!.maxPauseMs).toBe(30_000);
    // A year asked for; a's maxPause (30 s) is what it gets.
    table.pacingFor("a")!.slowDown(365 * 24 * 3_600_000, 429);
    const b = table.pacingFor("b")!.pacer.state();
    expect(b).toMatchObject({ pauseReason: "429" });
    expect(b.pausedForMs).toBeGreaterThan(29_000);
    expect(b.pausedForMs).toBeLessThanOrEqual(30_000);
    expect(table.pacingFor("other")!.pacer.state()).toMatchObject({ pausedForMs: 0 });
    expect(table.statusOf("b")).toMatchObject({ limit: null, pause: { reason: "429" } });
    expect(table.statusOf("other")).toBeUndefined();
    void pacers.close();
  });

  it("reports queue depths at scrape: limited upstreams always, others while someone waits", async () => {
    const { pacers, metrics, limited, open, config } = setup();
    const table = pacers.tableFor(config(limited("reports", 1), open("files")));
    const reports = table.pacingFor("reports")!;
    reports.pacer.acquire("reports");
    const waiting = reports.pacer.acquire("reports") as Promise<Admission>;
    const text = await metrics.registry.metrics();
    expect(text).toMatch(/^bearer_proxy_rate_limit_queue_depth\{upstream="reports"\} 1$/m);
    expect(text).not.toMatch(/queue_depth\{upstream="files"\}/);
    await pacers.close();
    await expect(waiting).rejects.toBeInstanceOf(PacerClosedError);
  });

  it("logs at start when by: caller can only count peer addresses", () => {
    const { pacers, lines, limited, config } = setup();
    const named = {
      ...limited("named", 5, { by: "caller" }),
      allow: [{ user: "alice" }],
    } as UpstreamConfig;
    pacers.tableFor(config(limited("anonymous", 5, { by: "caller" }), named));
    const notes = lines.filter((line) => String(line.msg).includes("rateLimit.by is caller"));
    expect(notes.map((line) => line.upstream)).toEqual(["anonymous"]);
    void pacers.close();
  });
});

/**
 * Issue 18: when a reload is triggered — SIGHUP, an edit of the file, a Kubernetes ConfigMap
 * update (a `..data` symlink swap, the file itself never written) — and when not (same content,
 * other files in the folder).
 */
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  type ConfigWatcher,
  type ReloadTrigger,
  watchConfig,
} from "../../src/reload/config-watcher.js";

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(check: () => boolean, timeoutMs = 5_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await sleep(20);
  }
}

describe("config watcher", () => {
  let dir: string;
  let watcher: ConfigWatcher | undefined;
  afterEach(() => {
    watcher?.close();
    watcher = undefined;
    rmSync(dir, { recursive: true, force: true });
  });

  async function start(file: string, handleSignal = false) {
    const seen: ReloadTrigger[] = [];
    watcher = await watchConfig({
      file,
      debounceMs: 50,
      handleSignal,
      onChange: async (trigger) => {
        seen.push(trigger);
      },
    });
    return seen;
  }

  it("an edit of the file triggers once; rewriting the same content or other files does not", async () => {
    dir = mkdtempSync(join(tmpdir(), "bp-watch-"));
    const file = join(dir, "config.yaml");
    writeFileSync(file, "a: 1\n");
    const seen = await start(file);
    writeFileSync(file, "a: 1\n");
    writeFileSync(join(dir, "other.txt"), "x");
    await sleep(400);
    expect(seen).toEqual([]);
    writeFileSync(file, "a: 2\n");
    await until(() => seen.length === 1);
    // An editor's save: a new file renamed over the old one.
    writeFileSync(join(dir, ".config.yaml.swp"), "a: 3\n");
    renameSync(join(dir, ".config.yaml.swp"), file);
    await until(() => seen.length === 2);
    await sleep(300);
    expect(seen).toEqual(["file", "file"]);
  });

  it("a ConfigMap-style update (the ..data symlink swapped) is picked up", async () => {
    dir = mkdtempSync(join(tmpdir(), "bp-configmap-"));
    mkdirSync(join(dir, "..2026_11_23_v1"));
    writeFileSync(join(dir, "..2026_11_23_v1", "config.yaml"), "v: 1\n");
    symlinkSync("..2026_11_23_v1", join(dir, "..data"));
    symlinkSync(join("..data", "config.yaml"), join(dir, "config.yaml"));
    const seen = await start(join(dir, "config.yaml"));
    // What the kubelet does: a new timestamped folder, a new link, renamed over ..data.
    mkdirSync(join(dir, "..2026_11_23_v2"));
    writeFileSync(join(dir, "..2026_11_23_v2", "config.yaml"), "v: 2\n");
    symlinkSync("..2026_11_23_v2", join(dir, "..data_tmp"));
    renameSync(join(dir, "..data_tmp"), join(dir, "..data"));
    rmSync(join(dir, "..2026_11_23_v1"), { recursive: true });
    await until(() => seen.length === 1);
    expect(seen).toEqual(["file"]);
  });

  it("SIGHUP triggers a reload and does not end the process", async () => {
    dir = mkdtempSync(join(tmpdir(), "bp-sighup-"));
    const file = join(dir, "config.yaml");
    writeFileSync(file, "a: 1\n");
    const seen = await start(file, true);
    process.kill(process.pid, "SIGHUP");
    await until(() => seen.length === 1);
    expect(seen).toEqual(["SIGHUP"]);
  });

  it("changes are handled one at a time", async () => {
    dir = mkdtempSync(join(tmpdir(), "bp-serial-"));
    const file = join(dir, "config.yaml");
    writeFileSync(file, "a: 1\n");
    let running = 0;
    let most = 0;
    watcher = await watchConfig({
      file,
      handleSignal: false,
      onChange: async () => {
        running++;
        most = Math.max(most, running);
        await sleep(50);
        running--;
      },
    });
    await Promise.all([
      watcher.trigger("SIGHUP"),
      watcher.trigger("SIGHUP"),
      watcher.trigger("SIGHUP"),
    ]);
    expect(most).toBe(1);
  });
});

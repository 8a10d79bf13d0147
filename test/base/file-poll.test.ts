/**
 * The house's one file poll (issue 31): a Kubernetes-style `..data` symlink swap and a plain
 * rewrite are changes, a failure is told once per distinct failure, a change the caller could
 * not take is tried again, and a read the caller made between polls is not reported twice. Its
 * callers keep their own tests (test/token/secret-reader.test.ts, test/callers/htpasswd-reload,
 * test/net/reloading-client-certificate).
 */
import { mkdir, mkdtemp, rename, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import {
  type FilePollOptions,
  pollFiles,
  statSignature,
  statSignatureSync,
} from "../../src/base/file-poll.js";
import { FakeClock } from "../helpers/fake-clock.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "bp-file-poll-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A Secret volume as the kubelet lays it out: `file` → `..data/file` → `..<version>/file`. */
async function secretVolume(
  text: string,
): Promise<{ file: string; swap(text: string): Promise<void> }> {
  let version = 0;
  const write = async (content: string) => {
    version += 1;
    await mkdir(join(dir, `..v${version}`));
    await writeFile(join(dir, `..v${version}`, "secret"), content);
    await symlink(`..v${version}`, join(dir, "..data_tmp"));
    await rename(join(dir, "..data_tmp"), join(dir, "..data"));
  };
  await write(text);
  await symlink(join("..data", "secret"), join(dir, "secret"));
  return { file: join(dir, "secret"), swap: write };
}

/** A poll of one file, no timer unless `options` sets one, recording what it is told. */
function recordingPoll(file: string, options: Partial<FilePollOptions> = {}) {
  const changes: string[] = [];
  const errors: string[] = [];
  const poll = pollFiles({
    paths: [file],
    pollIntervalMs: 0,
    onChange: (signature) => {
      changes.push(signature);
    },
    onError: (error) => errors.push((error as { code?: string }).code ?? "?"),
    ...options,
  });
  return { poll, changes, errors };
}

/** A file holding "a", and the signature it has now. */
async function fileWithText(name: string): Promise<{ file: string; signature: string }> {
  const file = join(dir, name);
  await writeFile(file, "a");
  return { file, signature: statSignatureSync([file]) };
}

describe("pollFiles", () => {
  it("sees a ..data symlink swap, once", async () => {
    const volume = await secretVolume("old");
    const { poll, changes } = recordingPoll(volume.file, {
      initialSignature: statSignatureSync([volume.file]),
    });
    await poll.check();
    expect(changes).toHaveLength(0);
    await volume.swap("new");
    await poll.check();
    await poll.check();
    expect(changes).toEqual([await statSignature([volume.file])]);
    poll.close();
  });

  it("tells a failure once per distinct failure, and the change after it", async () => {
    const { file, signature } = await fileWithText("users");
    const { poll, changes, errors } = recordingPoll(file, { initialSignature: signature });
    await rm(file);
    await poll.check();
    await poll.check();
    expect(errors).toEqual(["ENOENT"]);
    await writeFile(file, "b");
    await poll.check();
    expect(changes).toHaveLength(1);
    poll.close();
  });

  it("tries a change the caller could not take again at the next check", async () => {
    const { file } = await fileWithText("key");
    let attempts = 0;
    const { poll, errors } = recordingPoll(file, {
      onChange: async () => {
        attempts++;
        if (attempts < 3) throw Object.assign(new Error("half-written"), { code: "EPARTIAL" });
      },
    });
    for (let i = 0; i < 4; i++) await poll.check();
    expect(attempts).toBe(3);
    expect(errors).toEqual(["EPARTIAL"]);
    poll.close();
  });

  it("does not report again what the caller read on its own", async () => {
    const { file, signature } = await fileWithText("secret");
    const { poll, changes } = recordingPoll(file, { initialSignature: signature });
    await writeFile(file, "bb");
    poll.seen(await statSignature([file]));
    await poll.check();
    expect(changes).toHaveLength(0);
    poll.close();
  });

  it("polls on its timers until closed, and not at all without files", async () => {
    const clock = new FakeClock();
    const { file, signature } = await fileWithText("secret");
    const { poll, changes } = recordingPoll(file, {
      initialSignature: signature,
      pollIntervalMs: 1_000,
      timers: clock,
    });
    await writeFile(file, "bb");
    await clock.advance(999);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(changes).toHaveLength(0);
    await clock.advance(1);
    // The stat runs on real I/O: the timer started it, wait for it to land.
    await vi.waitFor(() => expect(changes).toHaveLength(1), { timeout: 10_000 }); // real I/O
    poll.close();
    expect(clock.pendingTimers).toBe(0);
    const none = pollFiles({ paths: [], pollIntervalMs: 1_000, timers: clock, onChange: () => {} });
    expect(clock.pendingTimers).toBe(0);
    none.close();
  });
});

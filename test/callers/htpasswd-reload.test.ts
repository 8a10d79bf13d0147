import { mkdir, rename, rm, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { createHtpasswdUsers, type HtpasswdUsers } from "../../src/callers/htpasswd.js";
import { ConfigError } from "../../src/errors.js";
import { asHtpasswdB, capturingLogger, hashPassword, tempDir } from "./helpers.js";

let dir: string;
let remove: () => Promise<void>;
let users: HtpasswdUsers | undefined;
beforeEach(async () => {
  ({ dir, remove } = await tempDir());
});
afterEach(async () => {
  users?.close();
  users = undefined;
  await remove();
});

describe("htpasswd users file", () => {
  it("verifies known users; an unknown user is false, like a wrong password", async () => {
    const file = join(dir, "users");
    await writeFile(file, `alice:${asHtpasswdB(hashPassword("a:b:c"))}\n`);
    users = createHtpasswdUsers({ file, pollIntervalMs: 0 });
    expect(users.has("alice")).toBe(true);
    expect(users.size).toBe(1);
    expect(await users.verify("alice", "a:b:c")).toBe(true);
    expect(await users.verify("alice", "a:b")).toBe(false);
    expect(users.has("mallory")).toBe(false);
    expect(await users.verify("mallory", "a:b:c")).toBe(false);
  });

  it("a missing or invalid file at start is a ConfigError naming every problem", async () => {
    expect(() => createHtpasswdUsers({ file: join(dir, "nope") })).toThrow(ConfigError);
    const file = join(dir, "users");
    await writeFile(file, "a:{SHA}x\nb:plain\n");
    const error = (() => {
      try {
        createHtpasswdUsers({ file });
      } catch (e) {
        return e as ConfigError;
      }
    })();
    expect(error?.issues.map((i) => i.message)).toEqual([
      expect.stringContaining("line 1"),
      expect.stringContaining("line 2"),
    ]);
  });

  // Issue 30: `validate` refused such a file, the running proxy applied it and answered 407 to all.
  it("a file defining no user is refused at start and while running; /status shows it stale", async () => {
    const file = join(dir, "users");
    for (const content of ["", "# nobody yet\n\n"]) {
      await writeFile(file, content);
      expect(() => createHtpasswdUsers({ file })).toThrow(/defines no user/);
    }
    await writeFile(file, `alice:${hashPassword("pw")}\n`);
    let nowMs = Date.parse("2026-11-02T10:00:00Z");
    const { logger, records } = capturingLogger();
    users = createHtpasswdUsers({ file, pollIntervalMs: 0, logger, now: () => nowMs });
    expect(users.status()).toEqual({ file, users: 1, generation: 0, stale: false });
    for (const content of ["", "# only comments\n", "garbage\n"]) {
      await writeFile(file, content);
      await users.check();
      nowMs += 1_000;
      expect(await users.verify("alice", "pw")).toBe(true);
    }
    expect(users.status()).toMatchObject({
      users: 1,
      generation: 0,
      stale: true,
      staleSince: "2026-11-02T10:00:00.000Z",
      problem: expect.stringContaining("line 1: expected user:hash"),
    });
    expect(records.map((r) => r.msg)).toEqual(
      Array(3).fill(
        "callers.basic users file changed but is invalid or defines no user; keeping the users last loaded",
      ),
    );
    await writeFile(file, `bob:${hashPassword("b")}\n`);
    await users.check();
    expect(users.status()).toEqual({ file, users: 1, generation: 1, stale: false });
    expect(users.has("alice")).toBe(false);
  });

  it("reloads on change: a changed password and a removed user take effect, generation counts", async () => {
    const file = join(dir, "users");
    await writeFile(file, `alice:${hashPassword("old")}\nbob:${hashPassword("bob")}\n`);
    users = createHtpasswdUsers({ file, pollIntervalMs: 0 });
    expect(users.generation).toBe(0);

    await users.check();
    expect(users.generation).toBe(0); // unchanged file: no reload

    await writeFile(file, `alice:${hashPassword("new")}\n`);
    await users.check();
    expect(users.generation).toBe(1);
    expect(await users.verify("alice", "old")).toBe(false);
    expect(await users.verify("alice", "new")).toBe(true);
    expect(users.has("bob")).toBe(false);
  });

  it("keeps the last good users when the new file is invalid or gone, and logs no hash", async () => {
    const file = join(dir, "users");
    const good = hashPassword("pw");
    await writeFile(file, `alice:${good}\n`);
    const { logger, lines, records } = capturingLogger();
    users = createHtpasswdUsers({ file, pollIntervalMs: 0, logger });

    const bad = "$apr1$salt$HqJZimcKQFAMYayBlzkrA/";
    await writeFile(file, `alice:${hashPassword("other")}\nbob:${bad}\n`);
    await users.check();
    expect(users.generation).toBe(0);
    expect(await users.verify("alice", "pw")).toBe(true);
    expect(records.at(-1)).toMatchObject({
      level: "warn",
      problems: [expect.stringContaining('line 2: user "bob" has no bcrypt hash')],
    });

    await rm(file);
    await users.check();
    expect(await users.verify("alice", "pw")).toBe(true);
    expect(records.at(-1)).toMatchObject({ level: "warn", code: "ENOENT" });

    await writeFile(file, `carol:${hashPassword("c")}\n`);
    await users.check();
    expect(users.generation).toBe(1);
    expect(users.has("alice")).toBe(false);
    expect(await users.verify("carol", "c")).toBe(true);

    const logged = lines.join("");
    expect(logged).not.toContain(good.slice(7));
    expect(logged).not.toContain("HqJZ");
  });

  it("follows a Kubernetes Secret volume's ..data symlink swap by polling", async () => {
    // What the kubelet does: files live in a timestamped dir, `..data` points at it, the
    // visible name points through `..data`; an update writes a new dir and renames a new link.
    await mkdir(join(dir, "..2026_01"));
    await writeFile(join(dir, "..2026_01", "users"), `alice:${hashPassword("one")}\n`);
    await symlink("..2026_01", join(dir, "..data"));
    await symlink(join("..data", "users"), join(dir, "users"));
    users = createHtpasswdUsers({ file: join(dir, "users"), pollIntervalMs: 20 });
    expect(await users.verify("alice", "one")).toBe(true);

    await mkdir(join(dir, "..2026_02"));
    await writeFile(join(dir, "..2026_02", "users"), `alice:${hashPassword("two")}\n`);
    await symlink("..2026_02", join(dir, "..data_tmp"));
    await rename(join(dir, "..data_tmp"), join(dir, "..data"));
    await rm(join(dir, "..2026_01"), { recursive: true });

    const current = users;
    await vi.waitFor(() => expect(current.generation).toBe(1), { timeout: 10_000, interval: 10 });
    expect(await users.verify("alice", "two")).toBe(true);
    expect(await users.verify("alice", "one")).toBe(false);
  });
});

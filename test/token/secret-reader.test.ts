import { mkdir, mkdtemp, rename, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type Credentials, createCredentialReader } from "../../src/token/secret-reader.js";
import { FakeClock, settle } from "../helpers/fake-clock.js";

let dir: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "bp-secret-"));
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A reader of an inline id and a secret file holding "old", polled every 2 s, recording changes. */
async function watchedSecretFile() {
  const clock = new FakeClock();
  const path = join(dir, "secret");
  await writeFile(path, "old");
  const reader = createCredentialReader(
    { clientId: { kind: "inline", value: "id" }, clientSecret: { kind: "file", path } },
    { clock, pollIntervalMs: 2_000 },
  );
  const seen: Credentials[] = [];
  reader.onChange((c) => seen.push(c));
  return { clock, path, reader, seen };
}

describe("credential reader", () => {
  it("inline values need no files and never change", async () => {
    const reader = createCredentialReader({
      clientId: { kind: "inline", value: "id" },
      clientSecret: { kind: "inline", value: "secret" },
    });
    const first = await reader.read();
    expect(first).toMatchObject({ clientId: "id", clientSecret: "secret" });
    expect(first.version).toMatch(/^[0-9a-f]{16}$/);
    expect(first.version).not.toContain("secret");
    expect(reader.watchesFiles).toBe(false);
    reader.close();
  });

  it("files: trailing newlines trimmed, other whitespace kept", async () => {
    await writeFile(join(dir, "id"), "client-1\n");
    await writeFile(join(dir, "secret"), " pa ss\r\n");
    const reader = createCredentialReader(
      {
        clientId: { kind: "file", path: join(dir, "id") },
        clientSecret: { kind: "file", path: join(dir, "secret") },
      },
      { pollIntervalMs: 0 },
    );
    expect(await reader.read()).toMatchObject({ clientId: "client-1", clientSecret: " pa ss" });
    reader.close();
  });

  it("a missing or empty file is BP_ERR_SECRET_FILE naming the path, not the content", async () => {
    await writeFile(join(dir, "secret"), "\n");
    const empty = createCredentialReader(
      {
        clientId: { kind: "inline", value: "id" },
        clientSecret: { kind: "file", path: join(dir, "secret") },
      },
      { pollIntervalMs: 0 },
    );
    await expect(empty.read()).rejects.toMatchObject({
      code: "BP_ERR_SECRET_FILE",
      message: `clientSecretFile ${join(dir, "secret")} is empty`,
    });
    const missing = createCredentialReader(
      {
        clientId: { kind: "file", path: join(dir, "nope") },
        clientSecret: { kind: "inline", value: "x" },
      },
      { pollIntervalMs: 0 },
    );
    await expect(missing.read()).rejects.toMatchObject({
      code: "BP_ERR_SECRET_FILE",
      message: expect.stringContaining("ENOENT"),
    });
  });

  it("polling notices a rewritten file and reports the new values once", async () => {
    const { clock, path, reader, seen } = await watchedSecretFile();
    const before = await reader.read();
    await clock.advance(2_000);
    await reader.check();
    expect(seen).toHaveLength(0);

    await writeFile(path, "new-secret-that-is-longer");
    await clock.advance(2_000);
    await reader.check();
    await settle();
    expect(seen).toHaveLength(1);
    expect(seen[0]!.clientSecret).toBe("new-secret-that-is-longer");
    expect(seen[0]!.version).not.toBe(before.version);

    // Same content written again: a new mtime but no change event.
    await writeFile(path, "new-secret-that-is-longer");
    await reader.check();
    expect(seen).toHaveLength(1);
    reader.close();
    expect(clock.pendingTimers).toBe(0);
  });

  it("a rotation first seen by a token fetch's read is reported too, once", async () => {
    const { clock, path, reader, seen } = await watchedSecretFile();
    await reader.read();
    await writeFile(path, "rotated-before-the-poll");
    // A token fetch reads before the poll runs: the poll then finds nothing new on disk.
    expect((await reader.read()).clientSecret).toBe("rotated-before-the-poll");
    await clock.advance(2_000);
    await reader.check();
    await settle();
    expect(seen.map((c) => c.clientSecret)).toEqual(["rotated-before-the-poll"]);
    reader.close();
  });

  it("a Kubernetes-style ..data symlink swap is noticed", async () => {
    // secret -> ..data/secret, ..data -> ..v1 ; rotation points ..data at ..v2 atomically.
    await mkdir(join(dir, "..v1"));
    await mkdir(join(dir, "..v2"));
    await writeFile(join(dir, "..v1", "secret"), "first\n");
    await writeFile(join(dir, "..v2", "secret"), "second\n");
    await symlink("..v1", join(dir, "..data"));
    await symlink(join("..data", "secret"), join(dir, "secret"));
    const reader = createCredentialReader(
      {
        clientId: { kind: "inline", value: "id" },
        clientSecret: { kind: "file", path: join(dir, "secret") },
      },
      { pollIntervalMs: 0 },
    );
    const seen: string[] = [];
    reader.onChange((c) => seen.push(c.clientSecret ?? ""));
    expect((await reader.read()).clientSecret).toBe("first");
    await symlink("..v2", join(dir, "..data_tmp"));
    await rename(join(dir, "..data_tmp"), join(dir, "..data"));
    await reader.check();
    expect(seen).toEqual(["second"]);
    reader.close();
  });

  it("a file missing mid-swap keeps the old values and no event fires", async () => {
    const path = join(dir, "secret");
    await writeFile(path, "old");
    const reader = createCredentialReader(
      { clientId: { kind: "inline", value: "id" }, clientSecret: { kind: "file", path } },
      { pollIntervalMs: 0 },
    );
    const seen: string[] = [];
    reader.onChange((c) => seen.push(c.clientSecret ?? ""));
    await reader.read();
    await rm(path);
    await reader.check();
    expect(seen).toEqual([]);
    await writeFile(path, "back-with-new-value");
    await reader.check();
    expect(seen).toEqual(["back-with-new-value"]);
    reader.close();
  });

  it("a listener that throws neither stops the others nor rejects check()", async () => {
    const secretPath = join(dir, "secret");
    await writeFile(secretPath, "old");
    const reader = createCredentialReader(
      {
        clientId: { kind: "inline", value: "id" },
        clientSecret: { kind: "file", path: secretPath },
      },
      { pollIntervalMs: 0 },
    );
    await reader.read();
    const seen: string[] = [];
    reader.onChange(() => {
      throw new Error("listener bug");
    });
    reader.onChange((c) => seen.push(c.clientSecret ?? ""));
    await writeFile(secretPath, "new-and-longer");
    await expect(reader.check()).resolves.toBeUndefined();
    expect(seen).toEqual(["new-and-longer"]);
    reader.close();
  });
});

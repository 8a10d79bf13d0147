import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { FakeClock } from "../helpers/fake-clock.js";
import { invalidClient, makeSource } from "./fake-endpoint.js";

let dir: string;
let secretPath: string;
beforeEach(async () => {
  dir = await mkdtemp(join(tmpdir(), "bp-rotation-"));
  secretPath = join(dir, "client-secret");
  await writeFile(secretPath, "old-secret\n");
});
afterEach(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** vi.waitFor with room for a loaded machine's real file I/O (its default is 1 s). */
const eventually = (check: () => void) => vi.waitFor(check, { timeout: 10_000 });

function rotatingSource(pollIntervalMs: number) {
  return makeSource({
    clock: new FakeClock(),
    spec: { clientSecret: { kind: "file", path: secretPath } },
    extra: { secretPollIntervalMs: pollIntervalMs },
  });
}

describe("secret rotation", () => {
  it("a changed clientSecretFile drops the cached token at once and the next request uses the new secret", async () => {
    const { clock, source, endpoint, logs } = rotatingSource(2_000);
    endpoint.latencyMs = 300;
    source.start();
    await eventually(() => expect(endpoint.calls).toHaveLength(1)); // after the real file read
    await clock.advance(300);
    expect(source.peekToken()?.value).toBe("tok-1");
    expect(endpoint.calls[0]!.credentials.clientSecret).toBe("old-secret");

    await writeFile(secretPath, "new-secret-v2\n");
    await clock.advance(2_000); // the poll fires; stat and read are real I/O
    await eventually(() => expect(endpoint.calls).toHaveLength(2));
    expect(source.peekToken()).toBeUndefined(); // dropped before the new one arrived
    expect(endpoint.calls[1]!.atMs).toBe(2_300);
    expect(endpoint.calls[1]!.credentials.clientSecret).toBe("new-secret-v2");
    expect(logs.records.find((r) => r.msg === "secret rotation picked up")).toMatchObject({
      droppedCachedToken: true,
    });
    await clock.advance(300);
    expect((await source.getToken()).value).toBe("tok-2");
    expect(logs.text()).not.toContain("new-secret-v2");
    expect(logs.text()).not.toContain("old-secret");
    source.close();
    expect(clock.pendingTimers).toBe(0);
  });

  it("after invalid_client, a rotated file is retried promptly instead of after the 30 s backoff", async () => {
    const { clock, source, endpoint } = rotatingSource(2_000);
    endpoint.answer = (call) =>
      call.credentials.clientSecret === "new-secret-v2" ? endpoint.token(600) : invalidClient();
    source.start();
    await eventually(() => expect(source.status().state).toBe("failed"));
    expect(clock.nextTimerAt()).toBeGreaterThanOrEqual(2_000);

    await writeFile(secretPath, "new-secret-v2\n");
    await clock.advance(2_000);
    await eventually(() => expect(source.peekToken()?.value).toBe("tok-1"));
    expect(endpoint.calls).toHaveLength(2);
    expect(endpoint.calls[1]!.atMs).toBeLessThan(3_000);
    source.close();
  });

  it("invalid_client re-reads the files before retrying (no polling needed)", async () => {
    const { clock, source, endpoint } = rotatingSource(0);
    endpoint.latencyMs = 500;
    endpoint.answer = (call) =>
      call.credentials.clientSecret === "new-secret-v2" ? endpoint.token(600) : invalidClient();
    source.start();
    await eventually(() => expect(endpoint.calls).toHaveLength(1));
    await writeFile(secretPath, "new-secret-v2\n"); // rotated while the request was in flight
    await clock.advance(500);
    await eventually(() => expect(source.status().state).toBe("failed"));
    await eventually(() => expect(clock.nextTimerAt()).toBe(1_000)); // min refresh interval, not 30 s
    await clock.advance(500);
    await eventually(() => expect(endpoint.calls).toHaveLength(2));
    expect(endpoint.calls[1]!.credentials.clientSecret).toBe("new-secret-v2");
    await clock.advance(500);
    expect(source.peekToken()?.value).toBe("tok-1");
    source.close();
  });

  it("a token fetched with the old secret while the file changed is not kept", async () => {
    const { clock, source, endpoint, logs } = rotatingSource(100);
    endpoint.latencyMs = 1_000;
    source.start();
    await eventually(() => expect(endpoint.calls).toHaveLength(1));
    await writeFile(secretPath, "new-secret-v2\n");
    await clock.advance(100);
    expect(source.status().state).toBe("fetching");
    // The poll's stat and read are real I/O: the old request lands only once the change is seen
    // (a fixed 50 ms wait for it was too short on a loaded CI machine).
    await eventually(() =>
      expect(logs.records.some((r) => r.msg === "secret rotation picked up")).toBe(true),
    );
    await clock.advance(900);
    expect(source.peekToken()).toBeUndefined();
    await eventually(() => expect(endpoint.calls).toHaveLength(2));
    expect(endpoint.calls[1]!.credentials.clientSecret).toBe("new-secret-v2");
    await clock.advance(1_000);
    expect(source.peekToken()?.value).toBe("tok-2");
    source.close();
  });
});

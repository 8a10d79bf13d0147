import { createHash, randomBytes } from "node:crypto";
import { Readable } from "node:stream";
import { request } from "undici";
import { beforeAll, describe, expect, it } from "vitest";
import { SCRIPTING_PREVIEW_HEADER } from "../../src/config/api-versions.js";
import {
  DOWNLOAD_PATTERN_PERIOD,
  downloadPattern,
  sha256OfDownload,
} from "../../src/emulator/download-pattern.js";
import type { EchoResponse } from "../../src/emulator/test-routes.js";
import { fetchEmulatorToken, useEmulator, useEmulatorAgent } from "../helpers/emulator.js";
import { rawExchange } from "./raw-tls.js";

describe("test routes", () => {
  const emulator = useEmulator();
  const agent = useEmulatorAgent(emulator);
  let token: string;
  let previewToken: string;
  beforeAll(async () => {
    token = await fetchEmulatorToken(emulator(), agent());
    previewToken = await fetchEmulatorToken(emulator(), agent(), { preview: true });
  });

  it("echoes the raw request target byte for byte and the raw headers in order", async () => {
    const target = "/echo/a%2Fb//c;d?x=1+2&y=%zz";
    const head = [
      `GET ${target} HTTP/1.1`,
      "Host: localhost",
      `Authorization: Bearer ${token}`,
      "X-Custom: One",
      "x-custom: two",
      "Connection: close",
    ].join("\r\n");
    const answer = await rawExchange(emulator(), `${head}\r\n\r\n`);
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    const echo = JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4)) as EchoResponse;
    expect(echo.method).toBe("GET");
    expect(echo.url).toBe(target);
    expect(echo.headers).toEqual([
      ["Host", "localhost"],
      ["Authorization", `Bearer ${token}`],
      ["X-Custom", "One"],
      ["x-custom", "two"],
      ["Connection", "close"],
    ]);
    expect(echo).toMatchObject({ bodyLength: 0, bodySha256: createHash("sha256").digest("hex") });
  });

  it("hashes a 10 MiB streamed upload", async () => {
    const chunk = randomBytes(1024 * 1024);
    const expected = createHash("sha256");
    for (let i = 0; i < 10; i++) expected.update(chunk);
    const response = await request(`${emulator().url}/echo/upload`, {
      method: "PUT",
      dispatcher: agent(),
      headers: { authorization: `Bearer ${token}` },
      body: Readable.from(
        (async function* () {
          for (let i = 0; i < 10; i++) yield chunk;
        })(),
      ),
    });
    expect(response.statusCode).toBe(200);
    const echo = (await response.body.json()) as EchoResponse;
    expect(echo).toMatchObject({
      method: "PUT",
      bodyLength: 10 * 1024 * 1024,
      bodySha256: expected.digest("hex"),
    });
    expect(echo.headers).toContainEqual(["transfer-encoding", "chunked"]);
  });

  it("accepts a preview token on test routes only with the preview X-Version", async () => {
    const ok = await request(`${emulator().url}/echo/x`, {
      dispatcher: agent(),
      headers: { authorization: `Bearer ${previewToken}`, "x-version": SCRIPTING_PREVIEW_HEADER },
    });
    expect(ok.statusCode).toBe(200);
    await ok.body.dump();
    const without = await request(`${emulator().url}/echo/x`, {
      dispatcher: agent(),
      headers: { authorization: `Bearer ${previewToken}` },
    });
    expect(without.statusCode).toBe(401);
    await without.body.dump();
    const defaultWithHeader = await request(`${emulator().url}/echo/x`, {
      dispatcher: agent(),
      headers: { authorization: `Bearer ${token}`, "x-version": SCRIPTING_PREVIEW_HEADER },
    });
    expect(defaultWithHeader.statusCode).toBe(401);
    await defaultWithHeader.body.dump();
  });

  it("streams the documented download pattern with a Content-Length", async () => {
    const bytes = 3 * 1024 * 1024 + 17;
    const response = await request(`${emulator().url}/download/${bytes}`, {
      dispatcher: agent(),
      headers: { authorization: `Bearer ${token}` },
    });
    expect(response.statusCode).toBe(200);
    expect(response.headers["content-length"]).toBe(String(bytes));
    const hash = createHash("sha256");
    let received = 0;
    let first: Buffer | undefined;
    for await (const chunk of response.body) {
      first ??= Buffer.from(chunk.subarray(0, 600));
      hash.update(chunk);
      received += chunk.length;
    }
    expect(received).toBe(bytes);
    expect(hash.digest("hex")).toBe(sha256OfDownload(bytes));
    expect(first).toEqual(downloadPattern(600));
    expect(downloadPattern(DOWNLOAD_PATTERN_PERIOD + 2).subarray(-3)).toEqual(
      Buffer.from([250, 0, 1]),
    );
  });

  it("honours backpressure: a stalled 1 GiB download holds little memory", async () => {
    const before = process.memoryUsage();
    const response = await request(`${emulator().url}/download/${1024 ** 3}`, {
      dispatcher: agent(),
      headers: { authorization: `Bearer ${token}` },
    });
    const iterator = response.body[Symbol.asyncIterator]();
    await iterator.next();
    // Stop reading; without backpressure the server would now encrypt and queue the whole GiB.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const after = process.memoryUsage();
    response.body.destroy();
    const grownBytes = after.rss + after.arrayBuffers - (before.rss + before.arrayBuffers);
    expect(grownBytes).toBeLessThan(128 * 1024 * 1024);
  });

  it("answers 400 to a download size that is not a number", async () => {
    const response = await request(`${emulator().url}/download/12abc`, {
      dispatcher: agent(),
      headers: { authorization: `Bearer ${token}` },
    });
    expect(response.statusCode).toBe(400);
    await response.body.dump();
  });

  it("redirects with 307 to example.invalid (and undici does not follow it)", async () => {
    const response = await request(`${emulator().url}/redirect`, {
      dispatcher: agent(),
      headers: { authorization: `Bearer ${token}` },
    });
    expect(response.statusCode).toBe(307);
    expect(response.headers.location).toBe("https://example.invalid/");
    await response.body.dump();
  });

  it("sends two separate Set-Cookie fields", async () => {
    const answer = await rawExchange(
      emulator(),
      `GET /set-cookies HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${token}\r\nConnection: close\r\n\r\n`,
    );
    expect(answer.match(/\r\nset-cookie: /gi)).toHaveLength(2);
  });

  it("puts every test route behind the bearer check", async () => {
    for (const path of ["/echo/x", "/download/10", "/redirect", "/set-cookies"]) {
      const response = await request(`${emulator().url}${path}`, { dispatcher: agent() });
      expect(response.statusCode, path).toBe(401);
      await response.body.dump();
    }
  });
});

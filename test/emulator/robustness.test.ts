import { connect } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { describe, expect, it } from "vitest";
import { fetchEmulatorToken, useEmulator, useEmulatorAgent } from "../helpers/emulator.js";
import { rawExchange } from "./raw-tls.js";

const FORM = "application/x-www-form-urlencoded;charset=UTF-8";

describe("the emulator survives hostile input", () => {
  const emulator = useEmulator();
  const agent = useEmulatorAgent(emulator);

  it("answers 400 to malformed request lines and 431 to huge headers", async () => {
    expect(await rawExchange(emulator(), "GARBAGE\r\n\r\n")).toMatch(/^HTTP\/1\.1 400 /);
    expect(await rawExchange(emulator(), "GET /echo/x HTTP/9.9\r\nHost: x\r\n\r\n")).toMatch(
      /^HTTP\/1\.1 (400|505) /,
    );
    const huge = `GET /echo/x HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(64 * 1024)}\r\n\r\n`;
    expect(await rawExchange(emulator(), huge)).toMatch(/^HTTP\/1\.1 431 /);
    expect(
      await rawExchange(
        emulator(),
        "POST /iam/v1/oauth2/token HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
      ),
    ).toMatch(/^HTTP\/1\.1 400 /);
  });

  it("shrugs off token requests aborted mid-body and plain-text clients", async () => {
    await new Promise<void>((resolve) => {
      const socket = tlsConnect(
        { host: "127.0.0.1", port: emulator().port, ca: emulator().caPem, servername: "localhost" },
        () => {
          socket.write(
            `POST /iam/v1/oauth2/token HTTP/1.1\r\nHost: x\r\nContent-Type: ${FORM}\r\nContent-Length: 1000\r\n\r\ngrant_type=cl`,
          );
          setTimeout(() => {
            socket.destroy();
            resolve();
          }, 50);
        },
      );
    });
    await new Promise<void>((resolve) => {
      const socket = connect(emulator().port, "127.0.0.1", () =>
        socket.end("GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
      );
      socket.on("error", () => resolve());
      socket.on("close", () => resolve());
      socket.resume();
    });
    // Aborted mid-chunked-body echo, too.
    await rawExchange(
      emulator(),
      "POST /echo/x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
      100,
    );
    await fetchEmulatorToken(emulator(), agent());
  });

  it("answers binary garbage and NUL bytes in token bodies with 400", async () => {
    const body = Buffer.from([0xff, 0xfe, 0x00, 0x3d, 0x26]);
    const head = `POST /iam/v1/oauth2/token HTTP/1.1\r\nHost: x\r\nContent-Type: ${FORM}\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`;
    const answer = await rawExchange(emulator(), Buffer.concat([Buffer.from(head), body]));
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toContain('"error":"invalid_request"');
  });

  it("answers 404 to absolute-form and odd targets without crashing", async () => {
    for (const target of ["https://127.0.0.1/scripts", "*", "/%", "//_emulator/stats"]) {
      const answer = await rawExchange(
        emulator(),
        `GET ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
      );
      expect(answer, target).toMatch(/^HTTP\/1\.1 (400|404) /);
    }
    await fetchEmulatorToken(emulator(), agent());
  });
});

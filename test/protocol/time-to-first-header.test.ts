import { connect } from "node:net";
import { EventSource, fetch } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ProxiedRawUpstream, startProxiedRawUpstream } from "./support/proxy-to.js";

/**
 * Issue 15 item 2: an upstream that sends its head and its first data 2 s later (server-sent
 * events, long-poll, slow reports). The client must get the head when the upstream sends it,
 * not with the first body byte: header timeouts and EventSource's `open` depend on it.
 */

const BODY_DELAY_MS = 2_000;
/**
 * "Well before the body", measured as the gap between head and body so a slow TLS handshake on
 * a loaded machine can't decide the outcome: a head held for the body arrives with it (gap ≈ 0).
 */
const MIN_HEAD_LEAD_MS = 1_000;

const HEADS: Record<string, string> = {
  "/chunked":
    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n",
  "/events":
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n",
  "/until-close": "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\n",
};

function chunk(text: string): string {
  return `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;
}

describe("the response head is relayed before a late body", () => {
  let setup: ProxiedRawUpstream;

  beforeAll(async () => {
    setup = await startProxiedRawUpstream(async ({ head, socket }) => {
      const path = head.split(" ")[1]!;
      socket.write(HEADS[path] ?? "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n");
      await new Promise((resolve) => setTimeout(resolve, BODY_DELAY_MS));
      if (path === "/until-close") {
        socket.end("late data");
      } else if (path === "/events") {
        socket.write(chunk("data: first\n\n"));
        socket.end("0\r\n\r\n");
      } else {
        socket.end(`${chunk('{"late":true}')}0\r\n\r\n`);
      }
    });
  });
  afterAll(async () => {
    await setup.close();
  });

  /** Milliseconds from sending to the end of the head, and to the first body byte. */
  function timeRawResponse(path: string): Promise<{ headMs: number; bodyMs: number }> {
    return new Promise((resolve, reject) => {
      const started = performance.now();
      let text = "";
      let headMs: number | undefined;
      const socket = connect(setup.proxy.port, "127.0.0.1", () => {
        socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
      });
      socket.on("error", reject);
      socket.on("data", (data: Buffer) => {
        text += data.toString("latin1");
        const headEnd = text.indexOf("\r\n\r\n");
        if (headEnd === -1) return;
        headMs ??= performance.now() - started;
        if (text.length > headEnd + 4) {
          socket.destroy();
          resolve({ headMs, bodyMs: performance.now() - started });
        }
      });
    });
  }

  for (const path of ["/chunked", "/until-close"]) {
    it(`raw client, ${path}: head in milliseconds, body after ${BODY_DELAY_MS} ms`, async () => {
      const { headMs, bodyMs } = await timeRawResponse(path);
      console.log(
        `${path}: head after ${headMs.toFixed(0)} ms, first body byte after ${bodyMs.toFixed(0)} ms`,
      );
      expect(bodyMs - headMs).toBeGreaterThan(MIN_HEAD_LEAD_MS);
      expect(bodyMs).toBeGreaterThan(BODY_DELAY_MS - 200);
    });
  }

  it("undici fetch resolves on the head of an event stream, then reads the late event", async () => {
    const started = performance.now();
    const response = await fetch(`${setup.proxy.url}/events`);
    const headMs = performance.now() - started;
    expect(response.headers.get("content-type")).toBe("text/event-stream");
    const text = await response.text();
    const bodyMs = performance.now() - started;
    console.log(
      `fetch /events: resolved after ${headMs.toFixed(0)} ms, event after ${bodyMs.toFixed(0)} ms`,
    );
    expect(bodyMs - headMs).toBeGreaterThan(MIN_HEAD_LEAD_MS);
    expect(text).toBe("data: first\n\n");
    expect(bodyMs).toBeGreaterThan(BODY_DELAY_MS - 200);
  });

  it("EventSource opens on the head, before the first event", async () => {
    const source = new EventSource(`${setup.proxy.url}/events`);
    const started = performance.now();
    try {
      const openMs = await new Promise<number>((resolve, reject) => {
        source.onopen = () => resolve(performance.now() - started);
        source.onerror = () => reject(new Error("EventSource failed"));
      });
      const message = await new Promise<string>((resolve) => {
        source.onmessage = (event) => resolve(String(event.data));
      });
      const messageMs = performance.now() - started;
      console.log(
        `EventSource: open after ${openMs.toFixed(0)} ms, message after ${messageMs.toFixed(0)} ms`,
      );
      expect(messageMs - openMs).toBeGreaterThan(MIN_HEAD_LEAD_MS);
      expect(message).toBe("first");
      expect(messageMs).toBeGreaterThan(BODY_DELAY_MS - 200);
    } finally {
      source.close();
    }
  });
});

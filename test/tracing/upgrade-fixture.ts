/**
 * WebSocket upgrades through the traced proxy: the traced-proxy bench (emulator as token
 * endpoint, OTLP receiver) plus a real `ws` server behind TLS as the upstream, and a `ws`
 * client's handshake as the caller sees it — opened, or refused with some other answer.
 */
import type { IncomingMessage } from "node:http";
import { afterAll, beforeAll } from "vitest";
import { WebSocket } from "ws";
import { startWsUpstream, type WsUpstream } from "../protocol/ws-upstream.js";
import { type TracedProxyBench, useTracedProxyBench } from "./proxy-fixture.js";

export interface TracedUpgradeBench extends TracedProxyBench {
  /** The WebSocket upstream, shared by the describe block. */
  ws: WsUpstream;
  /** The emulator's token endpoint, for upstreams that aren't the emulator. */
  tokenUrl(): string;
}

/**
 * `useTracedProxyBench` plus a WebSocket upstream whose `authorize` decides each handshake
 * (true: 101; a number: that status instead).
 */
export function useTracedUpgradeBench(
  authorize?: (req: IncomingMessage) => true | number,
): TracedUpgradeBench {
  const proxyBench = useTracedProxyBench({
    beforeClose: (emulator) => emulator.setTokenFault(undefined),
  });
  const bench = proxyBench as TracedUpgradeBench;
  bench.tokenUrl = () => `${bench.emulator.url}/iam/v1/oauth2/token`;
  beforeAll(async () => {
    bench.ws = await startWsUpstream({ cert: bench.pki.good, authorize });
  });
  afterAll(() => bench.ws.close());
  return bench;
}

/** A `ws` client that completed its handshake. */
export function openWebSocket(
  url: string,
  headers: Record<string, string> = {},
): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers, perMessageDeflate: false });
    ws.on("open", () => resolve(ws));
    ws.on("error", reject);
    ws.on("unexpected-response", (_req, res) => reject(new Error(`status ${res.statusCode}`)));
  });
}

/** The status a handshake that must not succeed got instead of 101. */
export function refusedHandshake(
  url: string,
  headers: Record<string, string> = {},
): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    ws.on("open", () => reject(new Error("the handshake succeeded")));
    ws.on("error", () => {});
    ws.on("unexpected-response", (_req, res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
  });
}

/** Sends `text` and resolves with the upstream's echo. */
export function echo(ws: WebSocket, text: string): Promise<string> {
  const answer = new Promise<string>((resolve) =>
    ws.once("message", (data: Buffer) => resolve(data.toString())),
  );
  ws.send(text);
  return answer;
}

/** Closes the client side and waits for the close to complete. */
export function closeWebSocket(ws: WebSocket): Promise<void> {
  return new Promise((resolve) => {
    ws.once("close", () => resolve());
    ws.close(1000);
  });
}

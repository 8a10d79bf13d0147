/**
 * The bench's own control requests (readiness polls, counters), kept apart from the load
 * generators. Trusts the bench CA for https:// URLs; never follows redirects.
 */
import { Agent, request } from "undici";

/** Create a control client trusting `caPem`. */
export function createControlClient(caPem) {
  const dispatcher = new Agent({
    connect: { ca: caPem, rejectUnauthorized: true },
    keepAliveTimeout: 1000,
    connections: 4,
  });

  /**
   * One request with optional `headers`; resolves `{status, text}`; rejects on network errors
   * or after `timeoutMs`.
   */
  async function send(method, url, { timeoutMs = 5000, headers } = {}) {
    const response = await request(url, {
      method,
      headers,
      dispatcher,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
      signal: AbortSignal.timeout(timeoutMs),
    });
    return { status: response.statusCode, text: await response.body.text() };
  }

  async function json(method, url) {
    const { status, text } = await send(method, url);
    if (status !== 200)
      throw new Error(`${method} ${url} answered ${status}: ${text.slice(0, 200)}`);
    return JSON.parse(text);
  }

  return {
    send,
    getJson: (url) => json("GET", url),
    postJson: (url) => json("POST", url),

    /**
     * Poll `url` every `intervalMs` until it answers 200; resolves with the milliseconds waited.
     * Rejects after `timeoutMs`, or at once when `isDead()` says the server process is gone.
     */
    async waitFor200(url, { timeoutMs = 15_000, intervalMs = 10, isDead = () => false } = {}) {
      const started = performance.now();
      let last = "no answer";
      while (performance.now() - started < timeoutMs) {
        if (isDead()) throw new Error(`process exited while waiting for ${url} (${last})`);
        try {
          const { status } = await send("GET", url, { timeoutMs: 1000 });
          if (status === 200) return performance.now() - started;
          last = `status ${status}`;
        } catch (error) {
          last = error.code ?? error.message;
        }
        await new Promise((resolve) => setTimeout(resolve, intervalMs));
      }
      throw new Error(`${url} not 200 within ${timeoutMs} ms (${last})`);
    },

    close: () => dispatcher.close(),
  };
}

/**
 * The token's recoveries inside an exchange (present for a request whose body can be sent
 * again, or that carries a DPoP token): an upstream 401 is held (head and a bounded body), the
 * token invalidated, a fresh one fetched, and the request replayed exactly once; if no fresh token comes, or the replay is 401
 * again, the client gets the upstream's 401 unchanged. A DPoP resource server's `use_dpop_nonce`
 * 401 (RFC 9449 §9) gets one retry with the same token and a proof carrying the nonce, before
 * any replay. Every answer may carry the origin's next `DPoP-Nonce` (§8.2): it is kept for the
 * next proofs.
 */

import type { RawHeaders } from "../../net/raw-headers.js";
import type { AccessToken } from "../../token/token-provider.js";
import { mapUpstreamError } from "../proxy-errors.js";
import { HoldingLayer } from "./holding-layer.js";

export class TokenReplayLayer extends HoldingLayer {
  /** The held 401 asks for a DPoP nonce it carries: retry with it, same token. */
  private useNonce = false;
  private nonceRetried = false;
  /** The request was sent again with a new token already (a replay happens once). */
  private replayed = false;

  override onHeaders(
    statusCode: number,
    rawHeaders: RawHeaders,
    resume: () => void,
    statusText: string,
  ): boolean {
    if (statusCode < 200) return this.next.onHeaders(statusCode, rawHeaders, resume, statusText);
    const { exchange } = this;
    const { dpop } = exchange.token;
    const useNonce =
      dpop !== undefined &&
      exchange.proofUrl !== "" &&
      dpop.noteResponse(exchange.proofUrl, statusCode, rawHeaders) &&
      !this.nonceRetried;
    if (statusCode === 401 && exchange.replayable && (!this.replayed || useNonce)) {
      this.useNonce = useNonce;
      return this.hold(statusCode, rawHeaders, resume, statusText);
    }
    return this.next.onHeaders(statusCode, rawHeaders, resume, statusText);
  }

  protected override decide(relay: () => void): void {
    if (this.useNonce) {
      // The resource server wants a nonce it has now sent: once more, same token, new proof.
      this.nonceRetried = true;
      this.exchange.resend({ waitMs: undefined }, relay);
      return;
    }
    void this.replay(relay);
  }

  private async replay(relay: () => void): Promise<void> {
    const { exchange } = this;
    let fresh: AccessToken | undefined;
    try {
      fresh = await this.freshToken();
    } catch {
      fresh = undefined;
    }
    if (exchange.finished) return;
    // No new token (endpoint down, or this one too young to drop): the 401 stands.
    if (!fresh || fresh.value === exchange.token.value) {
      relay();
      return;
    }
    this.replayed = true;
    exchange.token = fresh;
    // The replay is one more request the upstream counts: it waits for its turn like any other.
    exchange.resend({ waitMs: undefined, replay: true }, relay);
  }

  /**
   * A token other than the rejected one: one another request got already, or the one the
   * invalidation fetches. That wait is a span of the request's trace as the first wait is
   * (token-stage.ts), and the fetch its child: after a 401 it is often where the time went. A
   * hang-up ends it. The rejected token back means the 401 stands (too young to drop).
   */
  private async freshToken(): Promise<AccessToken> {
    const { exchange } = this;
    const tokens = exchange.route.tokens();
    const current = tokens.peekToken();
    if (current !== undefined && current.value !== exchange.token.value) return current;
    const wait = exchange.request.span.startTokenSpan(exchange.route.name);
    const signal = exchange.resendSignal();
    try {
      tokens.invalidate(exchange.token, wait);
      const token = tokens.peekToken() ?? (await tokens.getToken(signal, wait));
      wait.end();
      return token;
    } catch (err) {
      wait.end(signal.aborted ? "client_closed" : mapUpstreamError(err, exchange.route.name).code);
      throw err;
    }
  }
}

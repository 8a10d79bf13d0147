/**
 * Caller gate: may this caller use this upstream? (callers/caller-gate.ts: `allow` rules over
 * the TCP peer and `Proxy-Authorization`). After routing, before the token is touched; a cached
 * credential answers at once, a new one after its check (bcrypt, JWKS). The upstream sees
 * nothing of a refused request.
 */
import type { CallerGate, GateVerdict } from "../../callers/caller-gate.js";
import type { ProxiedRequest } from "../proxied-request.js";
import type { Flow, Stage } from "./pipeline.js";

export class CallerStage implements Stage {
  readonly name = "caller gate";

  constructor(private readonly gate: CallerGate) {}

  run(request: ProxiedRequest, flow: Flow): void {
    // Inside a terminated CONNECT the gate answered the CONNECT: its caller is every request's.
    if (request.tunnel !== undefined) {
      flow.next(request);
      return;
    }
    const verdict = this.gate.check(request.upstreamName, request.req);
    if (verdict instanceof Promise) {
      // A credential not seen lately: bcrypt or a JWKS lookup runs first.
      void verdict.then((settled) => this.admit(request, settled, flow));
      return;
    }
    this.admit(request, verdict, flow);
  }

  private admit(request: ProxiedRequest, verdict: GateVerdict, flow: Flow): void {
    if (request.answered) return; // the client left while its credential was checked
    request.caller = verdict.caller;
    if (verdict.allowed) {
      flow.next(request);
      return;
    }
    request.fail(verdict.code, verdict.message, {
      headers: verdict.headers,
      retryAfterSeconds: verdict.retryAfterSeconds,
    });
  }
}

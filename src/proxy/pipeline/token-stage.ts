/**
 * Token: the upstream's access token — the cached one at once, or a wait for the fetch (bounded
 * by `token.waitTimeout`, ended by a hang-up). The wait is a span of the request's trace: "where
 * did the time go" often ends here.
 */

import type { ProxiedRequest } from "../proxied-request.js";
import { mapUpstreamError } from "../proxy-errors.js";
import type { Flow, Stage } from "./pipeline.js";

export class TokenStage implements Stage {
  readonly name = "token";

  run(request: ProxiedRequest, flow: Flow): void {
    const route = request.route!;
    const tokens = route.tokens();
    const cached = tokens.peekToken();
    if (cached !== undefined) {
      request.token = cached;
      flow.next(request);
      return;
    }
    const abort = new AbortController();
    request.abortWait = abort;
    const wait = request.span.startTokenSpan(route.name);
    tokens.getToken(abort.signal, wait).then(
      (token) => {
        wait.end();
        request.token = token;
        flow.next(request);
      },
      (err: unknown) => {
        const mapped = mapUpstreamError(err, route.name);
        wait.end(abort.signal.aborted ? "client_closed" : mapped.code);
        request.fail(mapped.code, mapped.message, {
          retryAfterSeconds: mapped.retryAfterSeconds,
          cause: err,
        });
      },
    );
  }
}

/**
 * The guard stage (src/proxy/pipeline/guard-stage.ts): the request-guards checks run on the
 * request; a rejected request is answered with the guard's code and headers and its connection
 * closed; an accepted one carries its target and pathname on; absolute-form targets are
 * accepted only for hosts of the listener's route table; a plain request's `Expect` other than
 * 100-continue is answered 417 (an upgrade's is not looked at).
 */
import { describe, expect, it } from "vitest";
import { GuardStage } from "../../../src/proxy/pipeline/guard-stage.js";
import { RouteTable } from "../../../src/proxy/routing/route-table.js";
import { makeProxyConfig, makeUpstreamConfig } from "../../helpers/upstream-config.js";
import { errorBody, makeRoute, RecordingFlow, TestRequest } from "../support/pipeline-fakes.js";

const { limits, paths } = makeProxyConfig([]);
const routes = new RouteTable([
  makeRoute(makeUpstreamConfig("api", { match: { hosts: ["api.internal"] } })),
  makeRoute(makeUpstreamConfig("fallback")),
]);

function run(options: ConstructorParameters<typeof TestRequest>[0]) {
  const test = new TestRequest(options);
  const flow = new RecordingFlow();
  new GuardStage(limits, paths, routes).run(test.request, flow);
  return { test, flow };
}

describe("GuardStage", () => {
  it("is named guard", () => {
    expect(new GuardStage(limits, paths, routes).name).toBe("guard");
  });

  it("passes an acceptable request on, with its target and its pathname (query cut)", () => {
    const { test, flow } = run({ url: "/v1/items?page=2" });
    expect(flow.passed).toEqual([test.request]);
    expect(test.request.target).toMatchObject({
      kind: "ok",
      authority: "svc.local",
      pathAndQuery: "/v1/items?page=2",
      pathname: "/v1/items",
      absoluteForm: false,
    });
    expect(test.request.pathname).toBe("/v1/items");
    expect(test.answers()).toEqual([]);
  });

  it("answers a rejected request with the guard's code and closes the connection", () => {
    const { test, flow } = run({ url: "/a/../admin" });
    expect(flow.passed).toEqual([]);
    const answer = test.answer();
    expect(answer.status).toBe(400);
    expect(answer.headers.get("connection")).toEqual(["close"]);
    expect(errorBody(answer).code).toBe("bad_request");
    expect(test.fails[0]).toMatchObject({ code: "bad_request", extra: { close: true } });
    expect(test.record()).toMatchObject({ status: 400, errorCode: "bad_request", routed: false });
  });

  it("carries the guard's own headers (Allow on a refused TRACE)", () => {
    const { test, flow } = run({ method: "TRACE", url: "/" });
    expect(flow.passed).toEqual([]);
    const answer = test.answer();
    expect(answer.status).toBe(405);
    expect(answer.headers.get("allow")?.[0]).toContain("GET");
  });

  it("asks the route table which absolute-form hosts it serves", () => {
    const known = run({ url: "http://api.internal/v1/x", rawHeaders: ["Host", "api.internal"] });
    expect(known.flow.passed).toHaveLength(1);
    expect(known.test.request.target).toMatchObject({
      authority: "api.internal",
      pathAndQuery: "/v1/x",
      absoluteForm: true,
    });

    const unknown = run({ url: "http://elsewhere.example/x", rawHeaders: ["Host", "x"] });
    expect(unknown.flow.passed).toEqual([]);
    expect(unknown.test.answer().status).toBe(403);
    expect(unknown.test.record().errorCode).toBe("host_not_allowed");
  });

  it("lets Expect: 100-continue through, in any case", () => {
    for (const value of ["100-continue", "100-Continue"]) {
      const { flow } = run({ method: "POST", rawHeaders: ["Host", "a", "Expect", value] });
      expect(flow.passed).toHaveLength(1);
    }
  });

  it("answers any other expectation of a plain request 417, keeping the connection", () => {
    const { test, flow } = run({
      method: "POST",
      rawHeaders: ["Host", "a", "Expect", "200-ok"],
    });
    expect(flow.passed).toEqual([]);
    const answer = test.answer();
    expect(answer.status).toBe(417);
    expect(errorBody(answer).code).toBe("expectation_failed");
    // Not a malformed request: the guard's `close` is not asked for.
    expect(test.fails[0]!.extra?.close).toBeUndefined();
  });

  it("does not look at an upgrade's expectation", () => {
    const { flow } = run({
      kind: "upgrade",
      rawHeaders: ["Host", "a", "Expect", "200-ok", "Upgrade", "websocket"],
    });
    expect(flow.passed).toHaveLength(1);
  });
});

import Fastify from "fastify";
import { describe, expect, it } from "vitest";
import { LAZY_SCHEMA_COMPILERS } from "../../src/admin/lazy-schema-compilers.js";

/** The admin server loads fastify's schema compilers on first use: a route with a schema still works. */
describe("lazy schema compilers", () => {
  it("validate and serialize a route that has a schema, as fastify's defaults do", async () => {
    const app = Fastify({ schemaController: LAZY_SCHEMA_COMPILERS });
    app.post(
      "/x",
      {
        schema: {
          body: { type: "object", required: ["n"], properties: { n: { type: "integer" } } },
          response: { 200: { type: "object", properties: { n: { type: "integer" } } } },
        },
      },
      async (request) => ({ n: (request.body as { n: number }).n, dropped: true }),
    );
    const ok = await app.inject({ method: "POST", url: "/x", payload: { n: 2 } });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toEqual({ n: 2 });
    const bad = await app.inject({ method: "POST", url: "/x", payload: { n: "two" } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().message).toBe("body/n must be integer");
    await app.close();
  });
});

import { request } from "undici";
import { describe, expect, it } from "vitest";
import { SCRIPTING_PREVIEW_HEADER } from "../../src/config/api-versions.js";
import { useEmulator, useEmulatorAgent } from "../helpers/emulator.js";
import { rawExchange } from "./raw-tls.js";

const FORM = "application/x-www-form-urlencoded;charset=UTF-8";
const DEFAULT_PATH = "/iam/v1/oauth2/token";
const PREVIEW_PATH = "/oauth2/token";
const GOOD = "grant_type=client_credentials&client_id=demo-client&client_secret=demo-secret";
const basic = (id: string, secret: string) =>
  `Basic ${Buffer.from(`${id}:${secret}`).toString("base64")}`;

interface Case {
  name: string;
  path?: string;
  method?: string;
  headers?: Record<string, string | string[]>;
  body?: string;
  status: number;
  error: string;
}

const cases: Case[] = [
  {
    name: "GET on the token endpoint",
    method: "GET",
    body: undefined,
    status: 405,
    error: "invalid_request",
  },
  {
    name: "PUT on the preview token endpoint",
    path: PREVIEW_PATH,
    method: "PUT",
    headers: { "x-version": SCRIPTING_PREVIEW_HEADER, "content-type": FORM },
    status: 405,
    error: "invalid_request",
  },
  { name: "no Content-Type", headers: {}, status: 400, error: "invalid_request" },
  {
    name: "form Content-Type without charset",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    status: 400,
    error: "invalid_request",
  },
  {
    name: "form Content-Type with another charset",
    headers: { "content-type": "application/x-www-form-urlencoded;charset=ISO-8859-1" },
    status: 400,
    error: "invalid_request",
  },
  {
    name: "form Content-Type with quoted charset",
    headers: { "content-type": 'application/x-www-form-urlencoded;charset="UTF-8"' },
    status: 400,
    error: "invalid_request",
  },
  {
    name: "JSON Content-Type with parameters",
    headers: { "content-type": "application/json; charset=utf-8" },
    body: '{"grant_type":"client_credentials","client_id":"demo-client","client_secret":"demo-secret"}',
    status: 400,
    error: "invalid_request",
  },
  {
    name: "text/plain",
    headers: { "content-type": "text/plain" },
    status: 400,
    error: "invalid_request",
  },
  {
    name: "missing grant_type",
    body: "client_id=demo-client&client_secret=demo-secret",
    status: 400,
    error: "invalid_request",
  },
  {
    name: "missing client_id",
    body: "grant_type=client_credentials&client_secret=demo-secret",
    status: 400,
    error: "invalid_request",
  },
  {
    name: "missing client_secret",
    body: "grant_type=client_credentials&client_id=demo-client",
    status: 400,
    error: "invalid_request",
  },
  { name: "empty body", body: "", status: 400, error: "invalid_request" },
  {
    name: "repeated parameter",
    body: `${GOOD}&client_id=demo-client`,
    status: 400,
    error: "invalid_request",
  },
  {
    name: "malformed percent-encoding",
    body: `${GOOD}&x=%zz`,
    status: 400,
    error: "invalid_request",
  },
  {
    name: "percent-encoded invalid UTF-8",
    body: `${GOOD}&x=%C3%28`,
    status: 400,
    error: "invalid_request",
  },
  {
    name: "wrong grant_type",
    body: "grant_type=password&client_id=demo-client&client_secret=demo-secret",
    status: 400,
    error: "unsupported_grant_type",
  },
  {
    name: "unknown client",
    body: "grant_type=client_credentials&client_id=nobody&client_secret=demo-secret",
    status: 401,
    error: "invalid_client",
  },
  {
    name: "wrong secret",
    body: "grant_type=client_credentials&client_id=demo-client&client_secret=wrong-secret-123",
    status: 401,
    error: "invalid_client",
  },
  { name: "empty scope", body: `${GOOD}&scope=`, status: 400, error: "invalid_scope" },
  {
    name: "scope beyond the configured one",
    body: `${GOOD}&scope=files:read+files:admin`,
    status: 400,
    error: "invalid_scope",
  },
  {
    name: "scope with a double space",
    body: `${GOOD}&scope=files:read++files:write`,
    status: 400,
    error: "invalid_scope",
  },
  {
    name: "Basic and body credentials at once",
    headers: { "content-type": FORM, authorization: basic("demo-client", "demo-secret") },
    status: 400,
    error: "invalid_request",
  },
  {
    name: "Basic with a different body client_id",
    headers: { "content-type": FORM, authorization: basic("demo-client", "demo-secret") },
    body: "grant_type=client_credentials&client_id=other",
    status: 400,
    error: "invalid_request",
  },
  {
    name: "Basic with a wrong secret",
    headers: { "content-type": FORM, authorization: basic("demo-client", "wrong-secret-123") },
    body: "grant_type=client_credentials",
    status: 401,
    error: "invalid_client",
  },
  {
    name: "malformed Basic",
    headers: { "content-type": FORM, authorization: "Basic !!!" },
    body: "grant_type=client_credentials",
    status: 401,
    error: "invalid_client",
  },
  {
    name: "Bearer on the token endpoint",
    headers: { "content-type": FORM, authorization: "Bearer abc" },
    body: "grant_type=client_credentials",
    status: 401,
    error: "invalid_client",
  },
  {
    name: "JSON that is not an object",
    headers: { "content-type": "application/json" },
    body: '["grant_type"]',
    status: 400,
    error: "invalid_request",
  },
  {
    name: "malformed JSON",
    headers: { "content-type": "application/json" },
    body: '{"grant_type":',
    status: 400,
    error: "invalid_request",
  },
  {
    name: "JSON field that is not a string",
    headers: { "content-type": "application/json" },
    body: '{"grant_type":"client_credentials","client_id":"demo-client","client_secret":42}',
    status: 400,
    error: "invalid_request",
  },
  {
    name: "X-Version on the default endpoint",
    headers: { "content-type": FORM, "x-version": SCRIPTING_PREVIEW_HEADER },
    status: 400,
    error: "invalid_request",
  },
  {
    name: "preview endpoint without X-Version",
    path: PREVIEW_PATH,
    status: 400,
    error: "invalid_request",
  },
  {
    name: "preview endpoint with a wrong X-Version",
    path: PREVIEW_PATH,
    headers: { "content-type": FORM, "x-version": "2026-09-01" },
    status: 400,
    error: "invalid_request",
  },
  {
    name: "preview endpoint with two X-Version headers",
    path: PREVIEW_PATH,
    headers: {
      "content-type": FORM,
      "x-version": [SCRIPTING_PREVIEW_HEADER, SCRIPTING_PREVIEW_HEADER],
    },
    status: 400,
    error: "invalid_request",
  },
  {
    name: "body over 64 KiB",
    body: `${GOOD}&pad=${"a".repeat(70_000)}`,
    status: 413,
    error: "invalid_request",
  },
];

describe("token endpoint rejects non-conformant requests", () => {
  const emulator = useEmulator();
  const agent = useEmulatorAgent(emulator);

  for (const c of cases) {
    it(`answers ${c.status} ${c.error} to ${c.name}`, async () => {
      const method = c.method ?? "POST";
      const response = await request(`${emulator().url}${c.path ?? DEFAULT_PATH}`, {
        method: method as "POST",
        dispatcher: agent(),
        headers: c.headers ?? { "content-type": FORM },
        body: method === "GET" ? undefined : (c.body ?? GOOD),
      });
      expect(response.statusCode).toBe(c.status);
      expect(response.headers["cache-control"]).toBe("no-store");
      expect(response.headers["content-type"]).toBe("application/json");
      const text = await response.body.text();
      const json = JSON.parse(text);
      expect(Object.keys(json)).toEqual(["error", "error_description"]);
      expect(json.error).toBe(c.error);
      expect(typeof json.error_description).toBe("string");
      // Error bodies never echo a secret, right or wrong.
      expect(text).not.toMatch(/demo-secret|wrong-secret-123/);
      if (c.status === 401)
        expect(response.headers["www-authenticate"]).toBe('Basic realm="emulator"');
      if (c.status === 405) expect(response.headers.allow).toBe("POST");
    });
  }

  it("counts every one of them as rejected", async () => {
    emulator().resetStats();
    for (const c of cases.slice(0, 5)) {
      const response = await request(`${emulator().url}${c.path ?? DEFAULT_PATH}`, {
        method: (c.method ?? "POST") as "POST",
        dispatcher: agent(),
        headers: c.headers ?? { "content-type": FORM },
        body: c.method === "GET" ? undefined : (c.body ?? GOOD),
      });
      await response.body.dump();
    }
    expect(emulator().stats().tokenRequests).toMatchObject({
      total: 5,
      default: 4,
      preview: 1,
      rejected: 5,
    });
  });

  it("refuses a body announced over 64 KiB without reading it", async () => {
    const head = `POST ${DEFAULT_PATH} HTTP/1.1\r\nHost: localhost\r\nContent-Type: ${FORM}\r\nContent-Length: ${1024 ** 3}\r\n\r\n`;
    const answer = await rawExchange(emulator(), `${head}${"a".repeat(1024)}`, 2000);
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(answer).toMatch(/\r\nconnection: close\r\n/i);
  });
});

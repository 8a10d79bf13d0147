/**
 * Issue 16: the excerpt of a non-RFC 6749 error body (src/token/error-excerpt.ts) never shows our
 * client id or secret, in any form they were sent in, nor a token-looking string — whatever the
 * body, its media type, or where in it they sit. Property-tested with fast-check.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { formEncode, sentSecretForms } from "../../src/token/client-credentials.js";
import { EXCERPT_MAX_LENGTH, errorExcerpt } from "../../src/token/error-excerpt.js";

const TYPES = ["application/json", "text/html; charset=utf-8", "text/plain", ""];

/** The forms our values travel in; the client id's as token-response.ts lists them. */
function ownForms(clientId: string, clientSecret: string): string[] {
  return [
    ...sentSecretForms({ clientId, clientSecret }),
    clientId,
    encodeURIComponent(clientId),
    formEncode(clientId),
    JSON.stringify(clientId).slice(1, -1),
  ];
}

/** What a reader would recognise of a value once the excerpt's white space is collapsed. */
function visible(value: string): string {
  return value.replace(/[\s\u0000-\u001f\u007f-\u009f]+/g, " ").trim();
}

function htmlEscape(value: string): string {
  const named: Record<string, string> = {
    "&": "&amp;",
    "<": "&lt;",
    ">": "&gt;",
    '"': "&quot;",
    "'": "&#39;",
  };
  return value.replace(/[&<>"']/g, (c) => named[c]!);
}

/** Every UTF-16 unit as a JSON \u escape (decodes to `value`). */
function jsonEscape(value: string): string {
  return Array.from(
    { length: value.length },
    (_v, i) => `\\u${value.charCodeAt(i).toString(16).padStart(4, "0")}`,
  ).join("");
}

/** Body fragments that exercise the readers: JSON, HTML, entities, white space, controls. */
const fragment = fc.oneof(
  fc.string({ unit: "grapheme", maxLength: 30 }),
  fc.string({ unit: "binary", maxLength: 30 }),
  fc.constantFrom(
    '{"error":{"message":"',
    '"}}',
    "<html><body><p>",
    "</p></body></html>",
    "<script>",
    "</script>",
    "<!--",
    "-->",
    "&amp;",
    "&lt;",
    "\r\n",
    "\t",
    " ",
    '{"ErrorCode":"invalid_client","Error":"',
    "<",
    ">",
  ),
);

const TOKEN_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/=!";
/** A token-looking string: 20+ characters of the token alphabets with a letter and a digit. */
const tokenLike = fc
  .tuple(
    fc.string({ unit: fc.constantFrom(...TOKEN_ALPHABET), minLength: 18, maxLength: 120 }),
    fc.constantFrom(..."abcXYZ"),
    fc.constantFrom(..."0123456789"),
  )
  .map(([body, letter, digit]) => `${letter}${body}${digit}`);

describe("error body excerpts", () => {
  it("never contain our client id or secret in any form they were sent in", () => {
    fc.assert(
      fc.property(
        fc.string({ unit: "grapheme", minLength: 1, maxLength: 24 }),
        fc.string({ unit: "grapheme", minLength: 1, maxLength: 40 }),
        fc.array(fragment, { maxLength: 12 }),
        fc.array(fc.nat(), { maxLength: 6 }),
        (clientId, clientSecret, fragments, placements) => {
          fc.pre(visible(clientId).length > 0 && visible(clientSecret).length > 0);
          const forms = ownForms(clientId, clientSecret);
          // Also as the IdP may echo them: HTML-escaped, JSON \u-escaped (they decode to ours).
          const echoes = [
            ...forms,
            ...[clientId, clientSecret].flatMap((v) => [
              htmlEscape(v),
              `{"echo":"${jsonEscape(v)}"}`,
            ]),
          ];
          const parts = [...fragments];
          // Put forms of our values at random places in the body, several times.
          for (const [i, n] of placements.entries()) {
            parts.splice(n % (parts.length + 1), 0, echoes[(n + i) % echoes.length]!);
          }
          const body = parts.join("");
          const excerpt = errorExcerpt(body, "", forms);
          const typed = TYPES.map((type) => errorExcerpt(body, type, forms));
          for (const result of [excerpt, ...typed]) {
            if (result === undefined) continue;
            expect(result.length).toBeLessThanOrEqual(EXCERPT_MAX_LENGTH);
            expect(result).not.toMatch(/[\u0000-\u001f\u007f-\u009f]/);
            for (const form of forms) {
              const shown = visible(form);
              if (shown.length > 0) expect(result).not.toContain(shown);
            }
          }
        },
      ),
      { numRuns: 400 },
    );
  });

  it("never contain our values echoed escaped in a JSON or HTML body (decoded before cutting)", () => {
    fc.assert(
      fc.property(
        fc.string({ unit: "grapheme", minLength: 1, maxLength: 24 }),
        fc.string({ unit: "grapheme", minLength: 1, maxLength: 40 }),
        fc.string({ unit: "grapheme", maxLength: 40 }),
        fc.string({ unit: "grapheme", maxLength: 40 }),
        (clientId, clientSecret, before, after) => {
          fc.pre(visible(clientId).length > 0 && visible(clientSecret).length > 0);
          const forms = ownForms(clientId, clientSecret);
          const said = `${before}${clientSecret} for ${clientId}${after}`;
          const bodies: [string, string][] = [
            [`{"message":"${jsonEscape(said)}"}`, "application/json"],
            [`<html><body><p>${htmlEscape(said)}</p></body></html>`, "text/html"],
          ];
          for (const [body, type] of bodies) {
            const result = errorExcerpt(body, type, forms);
            if (result === undefined) continue;
            for (const form of forms) {
              const shown = visible(form);
              if (shown.length > 0) expect(result).not.toContain(shown);
            }
          }
        },
      ),
      { numRuns: 400 },
    );
  });

  it("never contain a token-looking string from the body", () => {
    fc.assert(
      fc.property(
        fc.array(fragment, { maxLength: 8 }),
        tokenLike,
        fc.nat(),
        fc.constantFrom(...TYPES),
        (fragments, token, at, type) => {
          const parts = [...fragments];
          parts.splice(at % (parts.length + 1), 0, ` ${token} `);
          const result = errorExcerpt(parts.join(""), type, ["unrelated-secret"]);
          if (result !== undefined) expect(result).not.toContain(token);
        },
      ),
      { numRuns: 400 },
    );
  });

  it("a token that contains our client id is still removed whole", () => {
    const token = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.my-client.c2lnbmF0dXJlMTIz";
    const result = errorExcerpt(`{"message":"token ${token} refused"}`, "application/json", [
      "my-client",
    ]);
    expect(result).toBe('{"message":"token [token?] refused"}');
  });

  it("keeps what helps: short codes, words, the HTML page's text", () => {
    expect(
      errorExcerpt(
        "<html><head><title>401 Unauthorized</title></head><body><h1>AADSTS7000215: Invalid client secret</h1></body></html>",
        "text/html",
        ["secret-value"],
      ),
    ).toBe("401 Unauthorized AADSTS7000215: Invalid client secret");
    expect(
      errorExcerpt('{ "status" : 403, "message" : "Access Denied" }', "application/json", []),
    ).toBe('{"status":403,"message":"Access Denied"}');
  });

  it("is at most 200 characters and marks the cut", () => {
    const result = errorExcerpt(`Error: ${"word ".repeat(100)}`, "text/plain", []);
    expect(result).toHaveLength(EXCERPT_MAX_LENGTH);
    expect(result?.endsWith("…")).toBe(true);
  });

  it("is withheld when the body names access_token (a broken success body holds a token)", () => {
    expect(errorExcerpt('{"access_token":"short1","token_type":', "application/json", [])).toBe(
      "(withheld: the body has an access_token field)",
    );
    expect(errorExcerpt("ACCESS_TOKEN=abc&x=1", "text/plain", [])).toBe(
      "(withheld: the body has an access_token field)",
    );
  });

  it("is withheld when a value of ours is part of the markers themselves", () => {
    // "red" survives as part of "[redacted]": nothing is shown rather than risk it.
    expect(errorExcerpt("the red door", "text/plain", ["red"])).toBeUndefined();
    expect(errorExcerpt("empty", "text/plain", [])).toBe("empty");
    expect(errorExcerpt("   ", "text/plain", [])).toBeUndefined();
  });
});

/**
 * Issue 30, as properties of the normalizer over paths mixing literal and percent-encoded
 * characters of every kind, in every mode: the result is a fixed point, never holds a dot-segment
 * the path did not, never decodes `%25`, a reserved character or (but with `unescape`) `%2F`, and
 * means what the path meant.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { ESCAPED_SLASH, normalizePath } from "../../src/base/path-normalization.js";
import type { PathsConfig } from "../../src/config/proxy-config.js";
import { hasUnsafePathSegment } from "../../src/proxy/request-guards.js";

const PIECE = fc.constantFrom(
  "/",
  "//",
  "a",
  "Z",
  "9",
  "-",
  ".",
  "..",
  "_",
  "~",
  ";",
  "%",
  "%61",
  "%41",
  "%7e",
  "%7E",
  "%2e",
  "%2E",
  "%2d",
  "%5f",
  "%2f",
  "%2F",
  "%25",
  "%2561",
  "%252f",
  "%3b",
  "%3B",
  "%5c",
  "%20",
  "%3f",
  "%e2%82%ac",
  "%C3%A9",
  "%zz",
  "%4",
);
const PATH = fc
  .array(PIECE, { minLength: 0, maxLength: 12 })
  .map((pieces) => `/${pieces.join("")}`);
const RULES: fc.Arbitrary<PathsConfig> = fc.record({
  mergeSlashes: fc.boolean(),
  escapedSlashes: fc.constantFrom("reject", "unescape", "keep"),
});

const UNRESERVED = /^[A-Za-z0-9._~-]$/;
const ESCAPE = /%[0-9A-Fa-f]{2}/g;

/** The escapes a path holds that normalization must keep (uppercased), in order. */
function keptEscapes(path: string, rules: PathsConfig): string[] {
  return [...path.matchAll(ESCAPE)]
    .map((m) => m[0].toUpperCase())
    .filter((triplet) => {
      const char = String.fromCharCode(Number.parseInt(triplet.slice(1), 16));
      if (UNRESERVED.test(char)) return false;
      return triplet !== "%2F" || rules.escapedSlashes === "keep";
    });
}

/** What a decoding reader makes of a path: every escape decoded once, slashes merged if asked. */
function meaning(path: string, rules: PathsConfig): string {
  const decoded = path.replace(ESCAPE, (e) => String.fromCharCode(Number.parseInt(e.slice(1), 16)));
  return rules.mergeSlashes ? decoded.replace(/\/+/g, "/") : decoded;
}

describe("path normalization (property)", () => {
  it("is a fixed point: normalizing the result again changes nothing", () => {
    fc.assert(
      fc.property(PATH, RULES, (path, rules) => {
        const once = normalizePath(path, rules);
        if (typeof once !== "string") return;
        expect(normalizePath(once, rules)).toBe(once);
      }),
      { numRuns: 5_000 },
    );
  });

  it("never makes a dot-segment or backslash the guard would have refused", () => {
    fc.assert(
      fc.property(PATH, RULES, (path, rules) => {
        const normalized = normalizePath(path, rules);
        if (typeof normalized !== "string" || hasUnsafePathSegment(path)) return;
        expect(hasUnsafePathSegment(normalized)).toBe(false);
      }),
      { numRuns: 5_000 },
    );
  });

  it("decodes only unreserved characters (and %2F with unescape); %25 is never decoded", () => {
    fc.assert(
      fc.property(PATH, RULES, (path, rules) => {
        const normalized = normalizePath(path, rules);
        if (typeof normalized !== "string") return;
        expect(normalized.match(ESCAPE) ?? []).toEqual(keptEscapes(path, rules));
        // Every % left starts an escape, so nothing new can be decoded downstream.
        expect(normalized.split("%").length - 1).toBe((normalized.match(ESCAPE) ?? []).length);
        if (rules.escapedSlashes !== "keep") expect(normalized).not.toMatch(/%2f/i);
        if (rules.mergeSlashes) expect(normalized).not.toContain("//");
        expect(normalized).not.toMatch(/%[0-9A-F]?[a-f]/);
      }),
      { numRuns: 5_000 },
    );
  });

  it("means what the path meant, and refuses an encoded slash exactly with reject", () => {
    fc.assert(
      fc.property(PATH, RULES, (path, rules) => {
        const normalized = normalizePath(path, rules);
        const wellFormed = !/%(?![0-9A-Fa-f]{2})/.test(path);
        if (!wellFormed) {
          expect(typeof normalized).not.toBe("string");
          return;
        }
        if (rules.escapedSlashes === "reject" && /%2f/i.test(path)) {
          expect(normalized).toBe(ESCAPED_SLASH);
          return;
        }
        expect(typeof normalized).toBe("string");
        const kept =
          rules.escapedSlashes === "keep"
            ? (s: string) => s.replace(/%2f/gi, "\0")
            : (s: string) => s;
        expect(meaning(kept(normalized as string), rules)).toBe(meaning(kept(path), rules));
      }),
      { numRuns: 5_000 },
    );
  });
});

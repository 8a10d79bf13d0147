/**
 * Issue 14, defect 4, as a property: whatever mix of literal, percent-encoded and double-encoded
 * dots and delimiters a path holds, the guard refuses it exactly when an upstream that decodes
 * them would see a `.` or `..` segment (or a backslash).
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { hasUnsafePathSegment } from "../../src/proxy/request-guards.js";

const DOT = fc.constantFrom(".", "%2e", "%2E", "%252e", "%25252E");
const OTHER = fc.constantFrom("a", "b-c", "~", "%41", "%7e", "v1", ";p", "%3b", "%253B");
const SEPARATOR = fc.constantFrom("/", "/", "%2f", "%2F", "%252f", "%5c", "%5C", "\\");
const SEGMENT = fc
  .array(fc.oneof({ weight: 2, arbitrary: DOT }, { weight: 1, arbitrary: OTHER }), {
    minLength: 0,
    maxLength: 3,
  })
  .map((parts) => parts.join(""));
const PATH = fc
  .array(fc.tuple(SEPARATOR, SEGMENT), { minLength: 1, maxLength: 5 })
  .map((pairs) => `/${pairs.map(([sep, seg], i) => (i === 0 ? seg : `${sep}${seg}`)).join("")}`);

/** The reference: decode the way a lenient upstream would (repeatedly), then look at segments. */
function unsafeOnceDecoded(path: string): boolean {
  let decoded = path;
  for (let i = 0; i < 4; i++) decoded = decoded.replace(/%25/gi, "%");
  decoded = decoded
    .replace(/%2e/gi, ".")
    .replace(/%2f/gi, "/")
    .replace(/%5c/gi, "\\")
    .replace(/%3b/gi, ";");
  if (decoded.includes("\\")) return true;
  return decoded.split("/").some((segment) => [".", ".."].includes(segment.split(";")[0]!));
}

describe("path guard (property)", () => {
  it("refuses exactly the paths a decoding upstream would resolve a dot-segment in", () => {
    fc.assert(
      fc.property(PATH, (path) => {
        expect(hasUnsafePathSegment(path)).toBe(unsafeOnceDecoded(path));
      }),
      { numRuns: 2_000 },
    );
  });
});

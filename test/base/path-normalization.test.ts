/**
 * Issue 30: the one normalized form of a request path (src/proxy/path-normalization.ts), by
 * example: what each mode makes of the paths that walked around a rule on `/admin/`.
 */
import { describe, expect, it } from "vitest";
import {
  ESCAPED_SLASH,
  MALFORMED_ESCAPE,
  normalizePath,
} from "../../src/base/path-normalization.js";
import type { PathsConfig } from "../../src/config/proxy-config.js";

const REJECT: PathsConfig = { mergeSlashes: true, escapedSlashes: "reject" };
const UNESCAPE: PathsConfig = { mergeSlashes: true, escapedSlashes: "unescape" };
const KEEP: PathsConfig = { mergeSlashes: true, escapedSlashes: "keep" };
const NO_MERGE: PathsConfig = { mergeSlashes: false, escapedSlashes: "reject" };

describe("normalizePath", () => {
  it("returns a plain path as the very same string", () => {
    for (const path of ["/", "/admin/x", "/a/b.c/~d-e_f", "/v1/items;p=1"]) {
      expect(normalizePath(path, REJECT)).toBe(path);
    }
  });

  it.each([
    ["/%61dmin/x", "/admin/x"],
    ["/adm%69n/x", "/admin/x"],
    ["/%41%5a%30%39%2D%2E%5F%7E", "/AZ09-._~"],
    ["/%7e%7E~", "/~~~"],
    ["//admin/x", "/admin/x"],
    ["///admin//x//", "/admin/x/"],
    // Other escapes keep their byte, in uppercase hex; %25 stays %25 (never decoded twice).
    ["/a%3bb%3B", "/a%3Bb%3B"],
    ["/%25%2561", "/%25%2561"],
    ["/%e2%82%ac", "/%E2%82%AC"],
    ["/a%20b%3fc%23d", "/a%20b%3Fc%23d"],
    ["/%C3%A9", "/%C3%A9"],
  ])("decodes unreserved characters and merges slashes: %s → %s", (raw, normalized) => {
    expect(normalizePath(raw, REJECT)).toBe(normalized);
    expect(normalizePath(raw, KEEP)).toBe(normalized);
  });

  it("refuses an encoded slash, either case, with escapedSlashes: reject", () => {
    expect(normalizePath("/admin%2fx", REJECT)).toBe(ESCAPED_SLASH);
    expect(normalizePath("/admin%2Fx", REJECT)).toBe(ESCAPED_SLASH);
    expect(normalizePath("/%61dmin%2fx", NO_MERGE)).toBe(ESCAPED_SLASH);
  });

  it("decodes an encoded slash with unescape, and merges it like a literal one", () => {
    expect(normalizePath("/admin%2fx", UNESCAPE)).toBe("/admin/x");
    expect(normalizePath("/%2Fadmin/x", UNESCAPE)).toBe("/admin/x");
    expect(normalizePath("/admin/%2f%2Fx", UNESCAPE)).toBe("/admin/x");
    expect(normalizePath("/admin%2f%2fx", { ...UNESCAPE, mergeSlashes: false })).toBe("/admin//x");
  });

  it("keeps an encoded slash as %2F with keep", () => {
    expect(normalizePath("/admin%2fx", KEEP)).toBe("/admin%2Fx");
    expect(normalizePath("/admin%2Fx", KEEP)).toBe("/admin%2Fx");
    expect(normalizePath("/%61dmin%2f%2fx", KEEP)).toBe("/admin%2F%2Fx");
  });

  it("keeps repeated slashes with mergeSlashes: false", () => {
    expect(normalizePath("//admin/x", NO_MERGE)).toBe("//admin/x");
    expect(normalizePath("//%61dmin//x", NO_MERGE)).toBe("//admin//x");
  });

  it.each(["/%", "/a%2", "/a%zz", "/%%32%66", "/a%g1/b", "/%2%66"])(
    "refuses a %% not followed by two hex digits: %s",
    (raw) => {
      for (const rules of [REJECT, UNESCAPE, KEEP, NO_MERGE]) {
        expect(normalizePath(raw, rules)).toBe(MALFORMED_ESCAPE);
      }
    },
  );
});

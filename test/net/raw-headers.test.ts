/**
 * The raw header helpers (src/net/raw-headers.ts): field names compared in any letter case
 * without making a lowercased copy, and values found by name in undici's raw lists.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { fieldValues, firstFieldValue, isFieldName } from "../../src/net/raw-headers.js";

describe("isFieldName", () => {
  it.each([
    ["Content-Length", "content-length", true],
    ["content-length", "content-length", true],
    ["CONTENT-LENGTH", "content-length", true],
    ["Content-Lengt", "content-length", false],
    ["Content_Length", "content-length", false],
    ["Host", "host", true],
    ["Hos", "host", false],
    // The characters next to A–Z ('@', '[') are not letters: they don't fold onto '`', '{'.
    ["@[", "`{", false],
    // Only A–Z fold: a non-ASCII letter never matches an ASCII one.
    ["\u0130ost", "iost", false],
    ["K\u212Aep", "kkep", false],
  ])("%s is %s: %s", (name, lower, expected) => {
    expect(isFieldName(name, lower)).toBe(expected);
  });

  it("agrees with lowercasing on any latin1 name (what undici's Buffers and Node's parser give)", () => {
    const latin1 = fc.string({
      unit: fc.integer({ min: 0x00, max: 0xff }).map((c) => String.fromCharCode(c)),
    });
    const lowerConstant = fc.constantFrom(
      "host",
      "content-length",
      "connection",
      "keep-alive",
      "te",
    );
    fc.assert(
      fc.property(latin1, lowerConstant, (name, lower) => {
        expect(isFieldName(name, lower)).toBe(name.toLowerCase() === lower);
        // The same name in any mix of case.
        const mixed = [...lower]
          .map((c, i) => (name.charCodeAt(i % (name.length || 1)) & 1 ? c.toUpperCase() : c))
          .join("");
        expect(isFieldName(mixed, lower)).toBe(true);
      }),
    );
  });
});

describe("fieldValues and firstFieldValue", () => {
  const raw = [
    Buffer.from("Retry-After"),
    Buffer.from("3"),
    "set-cookie",
    "a=1",
    Buffer.from("Set-Cookie"),
    Buffer.from("b=2"),
  ];

  it("find values by name in any case, Buffers read as latin1", () => {
    expect(firstFieldValue(raw, "retry-after")).toBe("3");
    expect(fieldValues(raw, "set-cookie")).toEqual(["a=1", "b=2"]);
    expect(firstFieldValue(raw, "content-type")).toBeUndefined();
    expect(fieldValues([Buffer.from("X-Name"), Buffer.from([0xe9])], "x-name")).toEqual(["é"]);
  });
});

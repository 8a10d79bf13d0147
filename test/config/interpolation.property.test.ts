/** Properties of `${…}` interpolation over arbitrary strings. */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { interpolateString } from "../../src/config/interpolate.js";

// Strings rich in the characters that matter, plus arbitrary unicode.
const tricky = fc.string({
  unit: fc.oneof(
    fc.constantFrom("$", "{", "}", ":", "-", "A", "_"),
    fc.string({ maxLength: 1, unit: "grapheme" }),
  ),
  maxLength: 40,
});
const name = fc.stringMatching(/^[A-Za-z_][A-Za-z0-9_]{0,15}$/);

describe("interpolateString properties", () => {
  it("leaves values without ${ unchanged", () => {
    fc.assert(
      fc.property(
        tricky.filter((s) => !s.includes("${")),
        (s) => {
          const r = interpolateString(s, { A: "x" });
          expect(r).toMatchObject({ value: s, vars: [], missing: [], errors: [] });
        },
      ),
    );
  });

  it("yields the default of an unset variable, whatever it is", () => {
    fc.assert(
      fc.property(
        name,
        tricky.filter((d) => !d.includes("}")),
        (variable, fallback) => {
          const r = interpolateString(`\${${variable}:-${fallback}}`, {});
          expect(r).toMatchObject({ value: fallback, missing: [], errors: [], whole: true });
        },
      ),
    );
  });

  it("inserts a variable's value verbatim, never interpolating it again", () => {
    // A "$" right before the reference would make it the escape "$${".
    const around = tricky.filter((s) => !s.includes("${") && !s.endsWith("$"));
    fc.assert(
      fc.property(name, tricky, around, (variable, value, around) => {
        const r = interpolateString(`${around}\${${variable}}${around}`, { [variable]: value });
        expect(r.value).toBe(`${around}${value}${around}`);
      }),
    );
  });

  it("turns any text back into itself once its ${ are escaped as $${", () => {
    fc.assert(
      fc.property(tricky, (s) => {
        const r = interpolateString(
          s.replaceAll("${", () => "$${"),
          {},
        );
        expect(r).toMatchObject({ value: s, vars: [], errors: [] });
      }),
    );
  });
});

/** Duration and size parsing. */
import { describe, expect, it } from "vitest";
import { parseByteSize, parseDurationMs } from "../../src/config/units.js";

describe("parseDurationMs", () => {
  it.each([
    ["250ms", 250],
    ["5s", 5_000],
    ["1.5s", 1_500],
    ["0.0005s", 1],
    ["2m", 120_000],
    ["1h", 3_600_000],
    [0, 0],
    [1234, 1234],
  ] as const)("%s → %i ms", (input, ms) => {
    expect(parseDurationMs(input)).toBe(ms);
  });

  it.each(["5", "5 s", "-1s", "1d", "", 1.5, -1])("rejects %j", (input) => {
    expect(() => parseDurationMs(input)).toThrow(TypeError);
  });
});

describe("parseByteSize", () => {
  it.each([
    ["512B", 512],
    ["16KiB", 16_384],
    ["1MiB", 1_048_576],
    ["1GiB", 1_073_741_824],
    ["2KB", 2_000],
    ["3MB", 3_000_000],
    ["1GB", 1_000_000_000],
    [4096, 4096],
  ] as const)("%s → %i bytes", (input, bytes) => {
    expect(parseByteSize(input)).toBe(bytes);
  });

  it.each(["1.5MiB", "1kib", "10", "", -1, 0.5])("rejects %j", (input) => {
    expect(() => parseByteSize(input)).toThrow(TypeError);
  });
});

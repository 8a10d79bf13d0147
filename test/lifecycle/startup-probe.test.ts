/**
 * /startup agrees with /readyz the moment the start's token arrives: the start condition is
 * asked whenever `started` is read, not only by a 50 ms poll (a probe right after /readyz turned
 * 200 used to read 503 "starting" for up to one poll, and longer on a loaded machine).
 */
import { describe, expect, it } from "vitest";
import { createLifecycle } from "../../src/lifecycle.js";
import { startAppUnderTest } from "../helpers/app-under-test.js";
import { emulatorUpstream, httpGet } from "../helpers/callers-fixture.js";
import { useEmulator } from "../helpers/emulator.js";

describe("the start condition", () => {
  it("is asked whenever `started` is read; once it holds, started stays", () => {
    const lifecycle = createLifecycle();
    let tokens = false;
    lifecycle.startWhen(() => tokens);
    expect(lifecycle.started).toBe(false);
    tokens = true;
    expect(lifecycle.started).toBe(true);
    tokens = false;
    expect(lifecycle.started).toBe(true);
  });
});

describe("/startup against /readyz on a real start", () => {
  const emulator = useEmulator();

  const status = async (url: string) => (await httpGet(url)).status;

  it("answers 200 as soon as /readyz does (three starts)", async () => {
    for (let start = 0; start < 3; start++) {
      const proxy = await startAppUnderTest({
        caPem: emulator().caPem,
        config: { upstreams: [emulatorUpstream(emulator().url, "files")] },
      });
      try {
        const deadline = Date.now() + 10_000;
        while ((await status(`${proxy.adminUrl}/readyz`)) !== 200) {
          expect(Date.now()).toBeLessThan(deadline);
        }
        expect(await status(`${proxy.adminUrl}/startup`)).toBe(200);
      } finally {
        await proxy.close();
      }
    }
  });
});

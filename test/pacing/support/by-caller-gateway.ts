import type { Emulator } from "../../../src/emulator/emulator-types.js";
import { type AppUnderTest, startAppUnderTest } from "../../helpers/app-under-test.js";
import { htpasswdFile } from "../../helpers/callers-fixture.js";
import { upstreamEntry } from "./gateway.js";

/** The two `callers.basic` users of {@link startByCallerGateway}. */
export const ALICE = { user: "alice", password: "alice-pw" };
export const BOB = { user: "bob", password: "bob-pw" };

/**
 * A gateway pacing by caller (`perCaller` is the `rateLimit`, with `by: caller`) in front of
 * `origin` twice: `by-address` names no callers, so each peer address has a budget; `by-user`
 * allows ALICE and BOB, so each user has one, whatever address they come from.
 */
export function startByCallerGateway(options: {
  caPem: string;
  emulator: Emulator;
  origin: string;
  perCaller: Record<string, unknown>;
}): Promise<AppUnderTest> {
  const { emulator, origin, perCaller } = options;
  return startAppUnderTest({
    caPem: options.caPem,
    files: {
      "callers.htpasswd": htpasswdFile({
        [ALICE.user]: ALICE.password,
        [BOB.user]: BOB.password,
      }),
    },
    config: {
      callers: { basic: { usersFile: "callers.htpasswd" } },
      upstreams: [
        upstreamEntry("by-address", origin, emulator, { rateLimit: perCaller }),
        upstreamEntry("by-user", origin, emulator, {
          rateLimit: perCaller,
          allow: [{ user: ALICE.user }, { user: BOB.user }],
        }),
      ],
    },
  });
}

/**
 * Runs a provider profile: its token endpoint on 127.0.0.1 over real TLS (a test-generated CA),
 * the API beside it (the fake upstream's /echo), and every case through the product's real token
 * client (`requestToken` with the dispatcher the proxy builds from the same settings). With
 * `endToEnd`, the proxy itself runs from a config document and a request through it must reach
 * the API with the provider's token.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Dispatcher } from "undici";
import { describe, expect, it } from "vitest";
import type { UpstreamConfigFile } from "../../../src/config/schema.js";
import { generateCertificates } from "../../../src/emulator/certificates.js";
import { BearerProxyError } from "../../../src/errors.js";
import { createDispatcher } from "../../../src/net/dispatcher.js";
import { requestToken } from "../../../src/token/client-credentials.js";
import { startAppUnderTest } from "../../helpers/app-under-test.js";
import {
  defaultRoutes,
  type FakeUpstream,
  startFakeUpstream,
} from "../../helpers/fake-upstreams.js";
import { makeTokenSpec } from "../../helpers/upstream-config.js";
import { useResource } from "../../helpers/use-resource.js";
import {
  type IdpProfile,
  type ProfileCase,
  readRequest,
  type SeenRequest,
  send,
} from "./idp-kit.js";

export interface RunningProfile {
  server: FakeUpstream;
  caPem: string;
  caFile: string;
  /** The token client's connection pool, as the proxy builds it (one per profile: one TLS handshake). */
  dispatcher: Dispatcher;
  /** Token requests seen, in order. */
  seen: SeenRequest[];
}

/** One CA and server certificate for every profile of a test file (EC keys, generated once). */
let certificates: ReturnType<typeof generateCertificates> | undefined;

/** Start a profile's server (token endpoint + /echo API) on 127.0.0.1 over TLS. */
export async function startProfileServer(
  profile: IdpProfile,
): Promise<RunningProfile & { close(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), "bp-idp-"));
  certificates ??= generateCertificates();
  const certs = await certificates;
  const caFile = join(dir, "ca.pem");
  writeFileSync(caFile, certs.caPem);
  const seen: SeenRequest[] = [];
  const tokenPath = profile.tokenPath.split("?")[0];
  const server = await startFakeUpstream({
    cert: { certPem: certs.certPem, keyPem: certs.keyPem },
    handler: (req, res) => {
      if ((req.url ?? "").split("?")[0] !== tokenPath) {
        defaultRoutes(req, res);
        return;
      }
      void readRequest(req).then((request) => {
        seen.push(request);
        send(res, profile.handle(request));
      });
    },
  });
  const dispatcher = createDispatcher({
    tls: { caFile, certFile: undefined, keyFile: undefined, serverName: undefined },
    connections: 1,
    connectTimeoutMs: 10_000,
    headersTimeoutMs: 10_000,
    bodyTimeoutMs: 10_000,
    idleConnectionMs: 10_000,
    egressProxy: undefined,
  });
  return {
    server,
    caPem: certs.caPem,
    caFile,
    dispatcher,
    seen,
    async close() {
      await dispatcher.close();
      await server.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The profile's server for the enclosing describe block: started before its tests, stopped after
 * them. Returns a getter: call it inside tests.
 */
export function useProfileServer(profile: IdpProfile): () => RunningProfile {
  return useResource(
    "useProfileServer: the server",
    () => startProfileServer(profile),
    (running) => running.close(),
  );
}

/** One describe block per profile: start its server, run its cases, stop it. */
export function describeProfile(profile: IdpProfile): void {
  describe(profile.provider, () => {
    const running = useProfileServer(profile);

    for (const c of profile.cases) {
      it(c.name, async () => {
        await runCase(profile, c, running());
      });
    }

    if (profile.endToEnd) {
      it("end to end: the proxy fetches the provider's token and the API receives it", async () => {
        await runEndToEnd(profile, running());
      });
    }
  });
}

/** The upstream entry of a config document for `profile`, with `extra` settings on top. */
export function upstreamFile(
  profile: IdpProfile,
  origin: string,
  extra: Partial<UpstreamConfigFile> = {},
): UpstreamConfigFile {
  return {
    name: "idp",
    baseUrl: origin,
    tokenUrl: `${origin}${profile.tokenPath}`,
    clientId: profile.client.id,
    clientSecret: profile.client.secret,
    ...profile.settings,
    ...extra,
  };
}

async function runCase(profile: IdpProfile, c: ProfileCase, running: RunningProfile) {
  const file = upstreamFile(profile, running.server.origin, c.settings);
  const spec = makeTokenSpec({ ...file, tls: { caFile: running.caFile } });
  const { dispatcher } = running;
  const credentials = { clientId: file.clientId ?? "", clientSecret: file.clientSecret ?? "" };
  const outcome = await requestToken(spec, credentials, { dispatcher, timeoutMs: 10_000 }).then(
    (token) => ({ token }),
    (error: unknown) => ({ error }),
  );
  if (c.expectToken) {
    if ("error" in outcome) throw outcome.error;
    const { token } = outcome;
    expect(token.accessToken).toBe(c.expectToken.accessToken);
    expect(token.expiresInSeconds).toBe(c.expectToken.expiresInSeconds);
    if ("scope" in c.expectToken) expect(token.scope).toBe(c.expectToken.scope);
    expect((token.notes ?? []).map((n) => n.code)).toEqual(c.expectToken.notes ?? []);
  }
  if (c.expectError) {
    expect("error" in outcome, "expected the token request to fail").toBe(true);
    const error = (outcome as { error: unknown }).error;
    expect(error).toBeInstanceOf(BearerProxyError);
    const bpe = error as BearerProxyError;
    expect(bpe.code).toBe(c.expectError.code);
    expect(bpe.message).toMatch(c.expectError.message);
    const excerpt = bpe.details?.bodyExcerpt;
    if (c.expectError.bodyExcerpt === undefined) expect(excerpt).toBeUndefined();
    else if (typeof c.expectError.bodyExcerpt === "string")
      expect(excerpt).toBe(c.expectError.bodyExcerpt);
    else expect(String(excerpt)).toMatch(c.expectError.bodyExcerpt);
    if (c.expectError.hint) expect(String(bpe.details?.hint)).toMatch(c.expectError.hint);
    // Never the secret (either one tried), in any of what an operator is shown.
    const shown = `${bpe.message} ${JSON.stringify(bpe.details ?? {})}`;
    for (const secret of [profile.client.secret, credentials.clientSecret]) {
      expect(shown).not.toContain(secret);
    }
  }
}

async function runEndToEnd(profile: IdpProfile, running: RunningProfile) {
  const ok = profile.cases.find((c) => c.expectToken && !c.settings);
  if (!ok?.expectToken) throw new Error(`${profile.provider}: no plain success case`);
  const aut = await startAppUnderTest({
    config: { upstreams: [upstreamFile(profile, running.server.origin)] },
    caPem: running.caPem,
  });
  try {
    const response = await fetch(`${aut.url}/echo/hello`);
    const echoed = (await response.json()) as { headers: [string, string][] };
    expect(response.status).toBe(200);
    const authorization = echoed.headers.filter(([name]) => name.toLowerCase() === "authorization");
    expect(authorization).toEqual([["authorization", `Bearer ${ok.expectToken.accessToken}`]]);
    // Tolerated departures are warned about once, and the token never reaches a log line.
    for (const note of ok.expectToken.notes ?? []) {
      expect(aut.records.filter((r) => r.note === note)).toHaveLength(1);
    }
    expect(aut.lines.join("\n")).not.toContain(ok.expectToken.accessToken);
    expect(aut.lines.join("\n")).not.toContain(profile.client.secret);
  } finally {
    await aut.close();
  }
}

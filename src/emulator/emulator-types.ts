import type { IncomingMessage, ServerResponse } from "node:http";

/** A client the emulator's token endpoints accept. */
export interface EmulatorClient {
  clientId: string;
  clientSecret: string;
}

/** Options for {@link startEmulator}; every field has a default suited to local development. */
export interface EmulatorOptions {
  /** Interface to listen on. Default `127.0.0.1`. */
  host?: string;
  /** Port to listen on. Default `8443`; `0` picks a free port. */
  port?: number;
  /** Accepted clients. Default `[{clientId: "demo-client", clientSecret: "demo-secret"}]`. */
  clients?: EmulatorClient[];
  /** Token lifetime in seconds. Default `600`; `expires_in` reports `lifetime - 1` (minimum 1). */
  tokenLifetimeSeconds?: number;
  /** Scopes granted, single-space separated. Default `"files:read files:write"`. */
  scope?: string;
  /**
   * Server certificate and key. Without it a CA and a server certificate for 127.0.0.1, ::1 and
   * localhost are generated at start. `caPem` is the CA clients should trust; default `certPem`
   * (right for a self-signed certificate).
   */
  tls?: { certPem: string; keyPem: string; caPem?: string };
  /** Where to write the CA PEM. Default: `ca.pem` in a new directory under `os.tmpdir()`, removed on close. */
  caFile?: string;
  /** Wall clock in milliseconds, used for token issue and expiry. Default `Date.now`. */
  now?: () => number;
}

/** Counters since start or the last `resetStats()`. */
export interface EmulatorStats {
  tokenRequests: {
    total: number;
    /** Requests to the default version's token path `/iam/v1/oauth2/token`. */
    default: number;
    /** Requests to the preview's token path `/oauth2/token`. */
    preview: number;
    /** Requests whose Content-Type was the accepted form type. */
    form: number;
    /** Requests whose Content-Type was `application/json`. */
    json: number;
    /** Requests carrying HTTP Basic client authentication. */
    basic: number;
    /** Requests answered with anything but 200. */
    rejected: number;
  };
  /** Requests to API routes, including the test routes (echo, download, redirect, set-cookies). */
  apiRequests: number;
  /** API requests answered 401. */
  unauthorized: number;
}

/** Replaces the token endpoints' behaviour; see `Emulator.setTokenFault`. */
export type TokenFaultHandler = (req: IncomingMessage, res: ServerResponse) => void;

/** A running emulator. */
export interface Emulator {
  /** `https://<host>:<port>`. */
  url: string;
  port: number;
  /** The CA that signed the server certificate. */
  caPem: string;
  /** Path where `caPem` was written. */
  caFile: string;
  /** A snapshot copy of the counters. */
  stats(): EmulatorStats;
  resetStats(): void;
  /** Every token issued so far is rejected with 401 from now on. */
  revokeAllTokens(): void;
  /** Lifetime of tokens issued from now on; a positive integer. */
  setTokenLifetime(seconds: number): void;
  /** Replace the accepted clients (e.g. secret rotation). */
  setClients(clients: EmulatorClient[]): void;
  /** Replace the token endpoints' behaviour (both paths) for fault tests; undefined restores normal. */
  setTokenFault(handler: TokenFaultHandler | undefined): void;
  /**
   * Refuse token requests whose `audience` is one of these (403 `access_denied`, as Auth0 answers
   * for an API the client may not use), after client authentication; `[]` restores normal.
   */
  refuseAudiences(audiences: readonly string[]): void;
  /** Closes the server and destroys open sockets; resolves without waiting for keep-alive. */
  close(): Promise<void>;
}

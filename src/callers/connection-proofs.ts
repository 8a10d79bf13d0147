/**
 * Which credentials each client connection presented and proved, and when: what lets a
 * keep-alive connection go on with its credential while its address is blocked
 * (caller-gate.ts). Clients behind one address (a NAT, a mesh sidecar in front of the gateway)
 * keep their pooled connections while a guesser among them is stopped; a new connection, or a
 * credential the connection never proved before the block began, gets the block's 429 without
 * a check — so the block tells a guesser nothing about any password.
 *
 * It also spares the hot path the digest of the header (credential-key.ts: a SHA-256 of a ~1 KiB
 * service-account token is most of a cached caller's cost): a connection remembers the last
 * `Proxy-Authorization` value it sent and that value's key, and a request repeating it exactly
 * — what every pooled client does — reuses the key. Only the connection's own last value is
 * kept, and only while the connection is open (Node holds the same header for its current
 * request anyway); what outlives connections, the verified-credential cache, still holds
 * digests only.
 *
 * Keyed by the socket in a WeakMap: a closed connection's entry goes with it, and nothing is
 * added to Node's socket.
 */
import { credentialKey } from "./credential-key.js";

export interface ConnectionProofs {
  /**
   * The {@link credentialKey} of `header` as sent on `connection`: computed once per value a
   * connection sends, then reused while it repeats it.
   */
  keyOf(connection: object, header: string): string;
  /** `connection` proved the credential `key` now (the first proof's time is kept). */
  remember(connection: object, key: string): void;
  /** Whether `connection` proved `key` before `sinceMs` (the proofs' clock). */
  provedBefore(connection: object, key: string, sinceMs: number): boolean;
}

export interface ConnectionProofsOptions {
  /** The failure throttle's clock, so proofs and blocks compare. Default performance.now. */
  now?: (() => number) | undefined;
  /**
   * Credentials remembered per connection; the oldest proof makes room. Default 8: a pooled
   * connection from a sidecar may carry several clients' credentials, but not many.
   */
  maxPerConnection?: number | undefined;
}

/** What one connection presented and proved. */
interface ConnectionCredentials {
  /** The last `Proxy-Authorization` value the connection sent, and its key. */
  lastHeader: string | undefined;
  lastKey: string;
  /** key → when the connection first proved it; undefined until it proves one. */
  proved: Map<string, number> | undefined;
}

export function createConnectionProofs(options: ConnectionProofsOptions = {}): ConnectionProofs {
  const now = options.now ?? (() => performance.now());
  const maxPerConnection = options.maxPerConnection ?? 8;
  const connections = new WeakMap<object, ConnectionCredentials>();

  function credentialsOf(connection: object): ConnectionCredentials {
    let credentials = connections.get(connection);
    if (credentials === undefined) {
      credentials = { lastHeader: undefined, lastKey: "", proved: undefined };
      connections.set(connection, credentials);
    }
    return credentials;
  }

  return {
    keyOf(connection, header) {
      const credentials = credentialsOf(connection);
      // Exact equality: a value differing in one byte gets its own digest.
      if (credentials.lastHeader === header) return credentials.lastKey;
      const key = credentialKey(header);
      credentials.lastHeader = header;
      credentials.lastKey = key;
      return key;
    },
    remember(connection, key) {
      const credentials = credentialsOf(connection);
      let proved = credentials.proved;
      if (proved === undefined) {
        proved = new Map();
        credentials.proved = proved;
      } else if (proved.has(key)) {
        return;
      } else if (proved.size >= maxPerConnection) {
        proved.delete(proved.keys().next().value!);
      }
      proved.set(key, now());
    },
    provedBefore(connection, key, sinceMs) {
      const at = connections.get(connection)?.proved?.get(key);
      return at !== undefined && at < sinceMs;
    },
  };
}

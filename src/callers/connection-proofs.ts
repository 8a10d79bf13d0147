/**
 * Which credentials each client connection proved, and when: what lets a keep-alive connection
 * go on with its credential while its address is blocked (caller-gate.ts). Clients behind one
 * address (a NAT, a mesh sidecar in front of the gateway) keep their pooled connections while a
 * guesser among them is stopped; a new connection, or a credential the connection never proved
 * before the block began, gets the block's 429 without a check — so the block tells a guesser
 * nothing about any password.
 *
 * Keyed by the socket in a WeakMap: a closed connection's entry goes with it, and nothing is
 * added to Node's socket. Only credential digests (credential-key.ts) are kept.
 */

export interface ConnectionProofs {
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

export function createConnectionProofs(options: ConnectionProofsOptions = {}): ConnectionProofs {
  const now = options.now ?? (() => performance.now());
  const maxPerConnection = options.maxPerConnection ?? 8;
  const proofs = new WeakMap<object, Map<string, number>>();
  return {
    remember(connection, key) {
      let proved = proofs.get(connection);
      if (!proved) {
        proved = new Map();
        proofs.set(connection, proved);
      } else if (proved.has(key)) {
        return;
      } else if (proved.size >= maxPerConnection) {
        proved.delete(proved.keys().next().value!);
      }
      proved.set(key, now());
    },
    provedBefore(connection, key, sinceMs) {
      const at = proofs.get(connection)?.get(key);
      return at !== undefined && at < sinceMs;
    },
  };
}

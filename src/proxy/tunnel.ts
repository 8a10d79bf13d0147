/**
 * A client connection that came in through a terminated CONNECT (intercept-entry.ts): every
 * request on it belongs to the upstream its CONNECT named, and to the caller its CONNECT proved.
 * The stages read it from the request's socket; nothing else about the way in reaches them.
 */

/** What a terminated CONNECT settled for every request inside it. */
export interface Tunnel {
  /** The CONNECT's authority (`api.example.com:443`): routes every request inside. */
  readonly authority: string;
  /** The identity proven on the CONNECT (`user:alice`), the caller of every request inside. */
  readonly caller: string | undefined;
}

const kTunnel = Symbol("bearer-proxy.tunnel");
type TunnelSocket = object & { [kTunnel]?: Tunnel };

/** Marks `socket` (the decrypted connection) as the inside of `tunnel`. */
export function markTunnel(socket: object, tunnel: Tunnel): void {
  (socket as TunnelSocket)[kTunnel] = tunnel;
}

/** The tunnel a request's socket is the inside of, if any. */
export function tunnelOf(socket: object | null | undefined): Tunnel | undefined {
  return socket === null || socket === undefined ? undefined : (socket as TunnelSocket)[kTunnel];
}

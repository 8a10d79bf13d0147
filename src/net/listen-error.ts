/**
 * A failed bind as a `ListenError`: which listener, the address as configured, and what the
 * system's code means in words. Node's own text (`listen EADDRINUSE: address already in use
 * 127.0.0.1:8443`) names neither the listener nor what moves it.
 */
import { ListenError, type ListenerRole } from "../errors.js";

const EXPLANATIONS: Readonly<Record<string, string>> = {
  EADDRINUSE: "the address is already in use (another process listens there)",
  EACCES: "permission denied (ports below 1024 need root or CAP_NET_BIND_SERVICE)",
  EADDRNOTAVAIL: "no network interface of this machine has that address",
};

/** `host:port`, with brackets around an IPv6 address. */
export function formatListenAddress(host: string, port: number): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}

/** `error` as a ListenError when it is a bind failure (it has a system code); else unchanged. */
export function toListenError(
  error: unknown,
  listener: ListenerRole,
  host: string,
  port: number,
): unknown {
  const code = (error as { code?: unknown } | null)?.code;
  if (error instanceof ListenError || typeof code !== "string" || !code.startsWith("E")) {
    return error;
  }
  const explanation = EXPLANATIONS[code] ?? (error as Error).message;
  return new ListenError(listener, formatListenAddress(host, port), code, explanation, error);
}

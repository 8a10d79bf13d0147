/**
 * Hop-by-hop header fields (RFC 9110 §7.6.1): meaningful for one connection only, so a proxy
 * never forwards them either way — plus whatever `Connection` names. One list for the config
 * checks, the request rewriting and the response relaying.
 */
export const HOP_BY_HOP_HEADERS: readonly string[] = Object.freeze([
  "connection",
  "keep-alive",
  "proxy-connection",
  "te",
  "transfer-encoding",
  "upgrade",
  "proxy-authorization",
  "proxy-authenticate",
  "http2-settings",
]);

/**
 * A TCP peer's address as the house shows and counts it: the same text in the caller gate's
 * labels, the failure throttle's blocks, and the pacing budgets and waiting room of a request
 * that no `allow` rule identified.
 */

const IPV4_MAPPED = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i;

/**
 * An IPv4 peer on a dual-stack listener arrives as `::ffff:10.1.2.3` (RFC 4291 §2.5.5.2); show
 * and count it as the IPv4 address it is.
 */
export function unmapIpv4(ip: string): string {
  return IPV4_MAPPED.exec(ip)?.[1] ?? ip;
}

/** `addr:10.1.2.3` for a caller known only by its address. */
export function addressLabel(ip: string): string {
  return `addr:${unmapIpv4(ip)}`;
}

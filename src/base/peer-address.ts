/**
 * A TCP peer's address as the house shows and counts it: the same text in the caller gate's
 * labels, the failure throttle's blocks (an IPv6 peer's by its /64: `throttleKey`), and the
 * pacing budgets and waiting room of a request that no `allow` rule identified.
 */

import { isIPv6 } from "node:net";

const IPV4_MAPPED = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i;

/**
 * An IPv4 peer on a dual-stack listener arrives as `::ffff:10.1.2.3` (RFC 4291 §2.5.5.2); show
 * and count it as the IPv4 address it is.
 */
export function unmapIpv4(ip: string): string {
  return IPV4_MAPPED.exec(ip)?.[1] ?? ip;
}

/** Hextets of an IPv6 address, an embedded IPv4 tail counting as two. */
function hextets(part: string): string[] {
  if (part === "") return [];
  const groups = part.split(":");
  if (groups[groups.length - 1]!.includes(".")) groups.push("0");
  return groups;
}

/**
 * What the failure throttle counts and blocks for a peer: an IPv4 address as itself, an IPv6
 * address as its /64 (`2001:db8:1:2::/64`). A /64 is one subnet (RFC 4291 §2.5.4) and often one
 * host's (SLAAC, privacy addresses, a cloud VM's delegated prefix), so keyed by the full address
 * a guesser would take a fresh address after every few guesses. Text that is not an IPv6
 * address is its own key.
 */
export function throttleKey(ip: string): string {
  const unmapped = unmapIpv4(ip);
  if (unmapped !== ip || !isIPv6(ip)) return unmapped;
  const address = ip.split("%", 1)[0]!;
  const gap = address.indexOf("::");
  let groups: string[];
  if (gap < 0) {
    groups = hextets(address);
  } else {
    const head = hextets(address.slice(0, gap));
    const tail = hextets(address.slice(gap + 2));
    groups = [...head, ...Array<string>(8 - head.length - tail.length).fill("0"), ...tail];
  }
  const prefix = groups.slice(0, 4).map((group) => Number.parseInt(group, 16).toString(16));
  return `${prefix.join(":")}::/64`;
}

/** `addr:10.1.2.3` for a caller known only by its address. */
export function addressLabel(ip: string): string {
  return `addr:${unmapIpv4(ip)}`;
}

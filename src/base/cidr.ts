/**
 * CIDR text (`10.12.0.0/16`, `fd00::/8`, or a single address) as `allow` rules write it, checked
 * once so config validation and `allow.ts` agree on what parses.
 */
import { isIPv4, isIPv6 } from "node:net";

/** A parsed CIDR: the address as written, its family and prefix length. */
export type ParsedCidr =
  | { ok: true; address: string; family: "ipv4" | "ipv6"; prefix: number; text: string }
  | { ok: false; message: string };

/**
 * Parse `address/prefix` (IPv4 prefix 0–32, IPv6 0–128); a bare address is a /32 or /128.
 * Host bits below the prefix are allowed and ignored (`10.12.1.0/16` is `10.12.0.0/16`).
 */
export function parseCidr(text: string): ParsedCidr {
  const trimmed = text.trim();
  const slash = trimmed.indexOf("/");
  const address = slash === -1 ? trimmed : trimmed.slice(0, slash);
  const prefixText = slash === -1 ? undefined : trimmed.slice(slash + 1);
  // A zone (`fe80::1%eth0`) names an interface, which a peer address never carries here.
  const family = isIPv4(address)
    ? "ipv4"
    : isIPv6(address) && !address.includes("%")
      ? "ipv6"
      : undefined;
  if (family === undefined) {
    return {
      ok: false,
      message: `expected an IPv4 or IPv6 address/prefix such as 10.0.0.0/8 or fd00::/8, found ${JSON.stringify(text)}`,
    };
  }
  const max = family === "ipv4" ? 32 : 128;
  if (prefixText === undefined) return { ok: true, address, family, prefix: max, text: trimmed };
  if (!/^\d{1,3}$/.test(prefixText) || Number(prefixText) > max) {
    return {
      ok: false,
      message: `expected a prefix length from 0 to ${max} after the ${family === "ipv4" ? "IPv4" : "IPv6"} address, found ${JSON.stringify(prefixText)}`,
    };
  }
  return { ok: true, address, family, prefix: Number(prefixText), text: trimmed };
}

/**
 * What stands for a `Proxy-Authorization` value wherever one is remembered (the verified-credential
 * cache, the credentials each connection proved): a SHA-256 digest, so a heap dump holds no
 * credential. One-shot `hash` is ~2× cheaper than a Hash object per request.
 */
import { hash } from "node:crypto";

export function credentialKey(header: string): string {
  return hash("sha256", header, "base64url");
}

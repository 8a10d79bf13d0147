/**
 * Leaf certificates for intercepted hosts, signed by the interception CA: what the client sees
 * when its CONNECT is terminated here. One per host, short-lived, cached and renewed long
 * before it expires.
 *
 * - SAN `DNS:host`, or `IP:address` for an IP literal (RFC 6125 §6.2.1: clients match an IP
 *   reference only against an iPAddress SAN, never a dNSName); CN the same, for old clients.
 * - Valid 24 h from an hour ago (a client whose clock runs behind still accepts it), replaced
 *   after 12 h in the cache: any leaf handed out has at least 12 h left, far beyond a handshake.
 * - Signed RSASSA-PKCS1-v1_5 SHA-256 by an RSA CA, ECDSA SHA-256 by a P-256 CA; a random
 *   positive 127-bit serial (RFC 5280 §4.1.2.2; CA/B Forum wants ≥ 64 bits of entropy).
 * - One EC P-256 key per instance (one per process) for every leaf: the leaves' trust comes
 *   from the CA's signature, the key never leaves memory, and anyone who could read it there
 *   could read the CA key too, so a key per host would protect nothing and cost a key
 *   generation per host. P-256 also makes the proxy's handshakes cheaper than RSA.
 *
 * @peculiar/x509 (with its ASN.1 stack, ~2.5 MiB of heap) loads on the first leaf.
 */
import { generateKeyPair, type KeyObject, randomBytes, webcrypto } from "node:crypto";
import { createSecureContext, type SecureContext } from "node:tls";
import { promisify } from "node:util";
import { LRUCache } from "lru-cache";
import { isIpHost } from "../base/authority.js";
import type { InterceptCa } from "../config/intercept-ca.js";
import { BearerProxyError, errorMessage } from "../errors.js";

/** ALPN offered inside a tunnel: HTTP/1.1 (the request pipeline speaks HTTP/1). */
export const INTERCEPT_ALPN_PROTOCOLS: readonly string[] = ["http/1.1"];

const HOUR_MS = 60 * 60 * 1000;

export const LEAF_DEFAULTS = {
  validityMs: 24 * HOUR_MS,
  /** notBefore this far in the past: clients whose clocks run slow accept the leaf. */
  backdateMs: HOUR_MS,
  /** A cached leaf is replaced after this long (so every leaf served has ≥ 12 h left). */
  renewAfterMs: 12 * HOUR_MS,
  /** Hosts whose leaves are kept; only intercepted upstreams' hosts ever get one. */
  maxHosts: 1000,
} as const;

export interface LeafCertificatesOptions {
  ca: InterceptCa;
  /** Wall clock, for the validity dates. Default Date.now. */
  now?: () => number;
  /** Monotonic clock of the cache (lru-cache `perf`). Default performance.now. */
  monotonicNow?: () => number;
  validityMs?: number;
  backdateMs?: number;
  renewAfterMs?: number;
  maxHosts?: number;
}

/** One minted leaf. `keyPem` is the shared leaf key: never logged. */
export interface Leaf {
  host: string;
  /** The leaf, then the CA's certificates (caCertFile): what the server sends. */
  certPem: string;
  keyPem: string;
  serialNumber: string;
  notBefore: Date;
  notAfter: Date;
  /** For `new tls.TLSSocket(socket, { isServer: true, secureContext, ALPNProtocols })`. */
  secureContext: SecureContext;
}

export interface LeafCertificates {
  /** The leaf for `host` (a DNS name or IP literal), from the cache or minted now. */
  leafFor(host: string): Promise<Leaf>;
  /** `leafFor(host).secureContext`. */
  secureContextFor(host: string): Promise<SecureContext>;
  /**
   * A `tls.createServer({ SNICallback })` that answers only the names `allow` accepts: a
   * certificate is minted for hosts the configuration intercepts, never for any name a client
   * sends.
   */
  sniCallback(
    allow: (host: string) => boolean,
  ): (servername: string, done: (error: Error | null, context?: SecureContext) => void) => void;
  /** Hosts with a cached leaf. */
  cachedHosts(): number;
  /** Leaves minted since creation (renewals included). */
  mintedCount(): number;
}

const generateKeyPairAsync = promisify(generateKeyPair);

const DNS_NAME =
  /^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$/;

/** Create the leaf factory of one CA. Nothing is generated until the first `leafFor`. */
export function createLeafCertificates(options: LeafCertificatesOptions): LeafCertificates {
  const now = options.now ?? Date.now;
  const validityMs = options.validityMs ?? LEAF_DEFAULTS.validityMs;
  const backdateMs = options.backdateMs ?? LEAF_DEFAULTS.backdateMs;
  let minted = 0;
  let signer: Promise<Signer> | undefined;
  const signerOnce = (): Promise<Signer> => {
    if (signer === undefined) {
      const creating = createSigner(options.ca);
      // A failure (not expected with a checked CA) is not kept: the next host tries again.
      creating.catch(() => {
        if (signer === creating) signer = undefined;
      });
      signer = creating;
    }
    return signer;
  };

  const cache = new LRUCache<string, Leaf>({
    max: options.maxHosts ?? LEAF_DEFAULTS.maxHosts,
    ttl: options.renewAfterMs ?? LEAF_DEFAULTS.renewAfterMs,
    perf: { now: options.monotonicNow ?? (() => performance.now()) },
    // Checked at every get: a fake clock in tests, and no timer per entry.
    ttlResolution: 0,
    // Concurrent handshakes for one host share one mint (lru-cache `fetch` is single-flight).
    fetchMethod: async (host) => {
      const leaf = await mint(await signerOnce(), host, now(), validityMs, backdateMs);
      minted += 1;
      return leaf;
    },
  });

  async function leafFor(host: string): Promise<Leaf> {
    const name = normalizeHost(host);
    const leaf = await cache.fetch(name);
    // fetchMethod never resolves undefined; the check is for the type.
    if (leaf === undefined) throw new Error(`no leaf certificate for ${name}`);
    return leaf;
  }

  return {
    leafFor,
    secureContextFor: async (host) => (await leafFor(host)).secureContext,
    sniCallback: (allow) => (servername, done) => {
      if (!allow(servername.toLowerCase())) {
        done(new Error(`no certificate for ${JSON.stringify(servername)}: not intercepted`));
        return;
      }
      leafFor(servername).then(
        (leaf) => done(null, leaf.secureContext),
        (error: unknown) => done(error instanceof Error ? error : new Error(String(error))),
      );
    },
    cachedHosts: () => cache.size,
    mintedCount: () => minted,
  };
}

/** `host` as a leaf names it: lowercase, without IPv6 brackets; throws on anything else. */
function normalizeHost(host: string): string {
  const bare = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
  const lower = bare.toLowerCase();
  if (isIpHost(lower) || DNS_NAME.test(lower)) return lower;
  throw new TypeError(
    `expected a host name or IP address for a leaf certificate, found ${JSON.stringify(host)}`,
  );
}

type X509Module = typeof import("@peculiar/x509");

/** What every leaf shares: the library, the CA's signing key and name, and the leaf key. */
interface Signer {
  x509: X509Module;
  caSigningKey: webcrypto.CryptoKey;
  signingAlgorithm: { name: string; hash: string };
  issuer: InstanceType<X509Module["Name"]>;
  /** The leaves' authorityKeyIdentifier: the CA's own subjectKeyIdentifier, else its key's hash. */
  authorityKeyId: string;
  chainPem: string;
  leafPublicKey: webcrypto.CryptoKey;
  leafKeyPem: string;
}

async function createSigner(ca: InterceptCa): Promise<Signer> {
  const x509 = await import("@peculiar/x509");
  const crypto = libraryCrypto();
  const caKey: KeyObject = ca.privateKey;
  const signingAlgorithm =
    ca.keyKind === "rsa"
      ? { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }
      : { name: "ECDSA", hash: "SHA-256" };
  const caSigningKey = await webcrypto.subtle.importKey(
    "pkcs8",
    caKey.export({ format: "der", type: "pkcs8" }),
    ca.keyKind === "rsa"
      ? { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }
      : { name: "ECDSA", namedCurve: "P-256" },
    false,
    ["sign"],
  );
  const caCertificate = new x509.X509Certificate(ca.certificate.raw);
  const leafKeys = await generateKeyPairAsync("ec", { namedCurve: "P-256" });
  const leafPublicKey = await webcrypto.subtle.importKey(
    "spki",
    leafKeys.publicKey.export({ format: "der", type: "spki" }),
    { name: "ECDSA", namedCurve: "P-256" },
    true,
    ["verify"],
  );
  return {
    x509,
    caSigningKey,
    signingAlgorithm,
    // The CA's subject as it is encoded (not re-typed from text): chain builders that compare
    // names byte for byte (Go, some Java stacks) find the issuer.
    issuer: caCertificate.subjectName,
    // Strict verifiers (OpenSSL's X509_STRICT, Python 3.13's default) refuse a leaf without an
    // authorityKeyIdentifier; OpenSSL compares it with the CA's subjectKeyIdentifier when the
    // CA has one, so that one is copied, and the key's SHA-1 (RFC 5280 §4.2.1.2) used otherwise.
    authorityKeyId:
      caCertificate.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId ??
      Buffer.from(await caCertificate.publicKey.getKeyIdentifier(crypto)).toString("hex"),
    chainPem: ca.chainPem,
    leafPublicKey,
    leafKeyPem: leafKeys.privateKey.export({ format: "pem", type: "pkcs8" }) as string,
  };
}

/** Node's webcrypto as the library types it (the DOM `Crypto`, which it is). */
function libraryCrypto(): Parameters<X509Module["X509CertificateGenerator"]["create"]>[1] {
  return webcrypto as unknown as Parameters<X509Module["X509CertificateGenerator"]["create"]>[1];
}

async function mint(
  signer: Signer,
  host: string,
  nowMs: number,
  validityMs: number,
  backdateMs: number,
): Promise<Leaf> {
  const { x509 } = signer;
  // The library's `Crypto` is the DOM type; node's webcrypto is that object.
  const crypto = webcrypto as unknown as Parameters<
    X509Module["X509CertificateGenerator"]["create"]
  >[1];
  const notBefore = new Date(Math.floor((nowMs - backdateMs) / 1000) * 1000);
  const notAfter = new Date(Math.floor((nowMs + validityMs) / 1000) * 1000);
  const serial = randomBytes(16);
  // Positive (top bit clear) and without a leading zero byte (DER would drop it).
  serial[0] = (serial[0]! & 0x7f) | 0x40;
  const serialNumber = serial.toString("hex");
  try {
    const certificate = await x509.X509CertificateGenerator.create(
      {
        serialNumber,
        subject: [{ CN: [host] }],
        issuer: signer.issuer,
        notBefore,
        notAfter,
        signingAlgorithm: signer.signingAlgorithm,
        publicKey: signer.leafPublicKey,
        signingKey: signer.caSigningKey,
        extensions: [
          new x509.BasicConstraintsExtension(false, undefined, true),
          new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
          new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
          new x509.SubjectAlternativeNameExtension([
            isIpHost(host) ? { type: "ip", value: host } : { type: "dns", value: host },
          ]),
          await x509.SubjectKeyIdentifierExtension.create(signer.leafPublicKey, false, crypto),
          new x509.AuthorityKeyIdentifierExtension(signer.authorityKeyId),
        ],
      },
      crypto,
    );
    const leafPem = certificate.toString("pem");
    const certPem = `${leafPem}\n${signer.chainPem}`;
    return {
      host,
      certPem,
      keyPem: signer.leafKeyPem,
      serialNumber,
      notBefore,
      notAfter,
      secureContext: createSecureContext({ cert: certPem, key: signer.leafKeyPem }),
    };
  } catch (error) {
    throw new BearerProxyError(
      "BP_ERR_INTERCEPT_CA",
      `cannot make a leaf certificate for ${host}: ${errorMessage(error)}`,
      { cause: error },
    );
  }
}

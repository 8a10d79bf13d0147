/**
 * Reads a credential's client id and secret (inline or from files), and the private key and
 * certificate of the secretless methods, and notices when the files change on disk, so a
 * rotated secret or key is used without a restart. The files are polled with the house's one
 * file poll (base/file-poll.ts, which follows Kubernetes' `..data` symlink swaps).
 */
import { readFile } from "../base/async-fs.js";
import { type Clock, systemClock } from "../base/clock.js";
import { pollFiles, statSignature } from "../base/file-poll.js";
import { hashValue } from "../base/fingerprint.js";
import type { SecretSource, TokenEndpointSpec } from "../config/proxy-config.js";
import { BearerProxyError } from "../errors.js";
import { keyMaterialFiles } from "./client-auth/index.js";

/** A credential as read right now. */
export interface Credentials {
  clientId: string;
  /** Undefined for the secretless client-auth methods. */
  clientSecret: string | undefined;
  /** PEM private key of private-key-jwt / tls-client-auth (see client-auth/index.ts). */
  clientKeyPem?: string | undefined;
  /** PEM certificate of private-key-jwt (`clientCertificateFile`) / tls-client-auth. */
  clientCertificatePem?: string | undefined;
  /** Hash of all of the above: equal versions mean equal credentials. Not a secret, never shown. */
  version: string;
}

/** What a reader reads: id and secret, and for the secretless methods their key files. */
export type CredentialSpec = Pick<TokenEndpointSpec, "clientId"> & {
  clientSecret?: SecretSource | undefined;
} & Partial<Pick<TokenEndpointSpec, "clientAuth" | "privateKeyJwt" | "tls">>;

export interface CredentialReader {
  /** Current values; files are re-read on every call (a token fetch is rare, files are tiny). */
  read(): Promise<Credentials>;
  /** Stat the files now and, if they changed, re-read them and notify onChange listeners. */
  check(): Promise<void>;
  /** Called with the new credentials when the files change to different values. */
  onChange(listener: (credentials: Credentials) => void): () => void;
  /** Whether any value comes from a file (and so can rotate). */
  readonly watchesFiles: boolean;
  close(): void;
}

export interface CredentialReaderOptions {
  clock?: Clock;
  /** How often files are stat()ed; 0 disables polling (check() still works). Default 5000. */
  pollIntervalMs?: number;
}

export const DEFAULT_SECRET_POLL_INTERVAL_MS = 5_000;

/** A reader for one credential; polls its files (if any) every `pollIntervalMs` until closed. */
export function createCredentialReader(
  spec: CredentialSpec,
  options: CredentialReaderOptions = {},
): CredentialReader {
  const clock = options.clock ?? systemClock;
  const pollIntervalMs = options.pollIntervalMs ?? DEFAULT_SECRET_POLL_INTERVAL_MS;
  const material =
    spec.clientAuth === undefined
      ? { key: undefined, certificate: undefined }
      : keyMaterialFiles({
          clientAuth: spec.clientAuth,
          privateKeyJwt: spec.privateKeyJwt,
          tls: spec.tls ?? {
            caFile: undefined,
            certFile: undefined,
            keyFile: undefined,
            serverName: undefined,
          },
        });
  const files = [
    ...[spec.clientId, spec.clientSecret].flatMap((s) => (s?.kind === "file" ? [s.path] : [])),
    ...[material.key, material.certificate].flatMap((path) => (path ? [path] : [])),
  ];
  const listeners = new Set<(credentials: Credentials) => void>();
  let lastVersion: string | undefined;
  let closed = false;
  // A changed signature re-reads; a missing file mid-swap keeps the old values, and a read
  // that fails is tried again at the next poll.
  const poll = pollFiles({
    paths: files,
    pollIntervalMs,
    timers: clock,
    onChange: async () => {
      await read();
    },
  });

  async function read(): Promise<Credentials> {
    const signature = await statSignature(files).catch(() => undefined);
    const [clientId, clientSecret, clientKeyPem, clientCertificatePem] = await Promise.all([
      readSource(spec.clientId, "clientIdFile"),
      spec.clientSecret && readSource(spec.clientSecret, "clientSecretFile"),
      material.key && readSource({ kind: "file", path: material.key }, keyField(spec)),
      material.certificate &&
        readSource({ kind: "file", path: material.certificate }, certificateField(spec)),
    ]);
    const credentials: Credentials = {
      clientId,
      clientSecret,
      ...(clientKeyPem === undefined ? {} : { clientKeyPem }),
      ...(clientCertificatePem === undefined ? {} : { clientCertificatePem }),
      version: versionOf([clientId, clientSecret, clientKeyPem, clientCertificatePem]),
    };
    const previous = lastVersion;
    lastVersion = credentials.version;
    if (signature !== undefined) poll.seen(signature);
    // A change is reported once, by whichever read saw it first: the poll's, or a token fetch's
    // that came before the poll (which then finds the files as it last read them).
    if (previous !== undefined && credentials.version !== previous && !closed) notify(credentials);
    return credentials;
  }

  function notify(credentials: Credentials): void {
    for (const listener of listeners) {
      // A listener's bug must not stop the others, nor the poll loop (an unhandled rejection).
      try {
        listener(credentials);
      } catch {}
    }
  }

  return {
    read,
    check: () => poll.check(),
    onChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    watchesFiles: files.length > 0,
    close() {
      closed = true;
      listeners.clear();
      poll.close();
    },
  };
}

async function readSource(source: SecretSource, field: string): Promise<string> {
  if (source.kind === "inline") return source.value;
  let text: string;
  try {
    text = await readFile(source.path, "utf8");
  } catch (error) {
    const code = (error as { code?: string }).code ?? "error";
    throw new BearerProxyError(
      "BP_ERR_SECRET_FILE",
      `cannot read ${field} ${source.path} (${code})`,
      {
        cause: error,
      },
    );
  }
  // `echo secret > file` and Kubernetes tooling leave a trailing newline.
  const value = text.replace(/[\r\n]+$/, "");
  if (value.length === 0) {
    throw new BearerProxyError("BP_ERR_SECRET_FILE", `${field} ${source.path} is empty`);
  }
  return value;
}

function versionOf(values: readonly (string | undefined)[]): string {
  // Unchanged for id + secret, so a version computed before this reader knew keys still matches.
  const present = values[2] === undefined && values[3] === undefined ? values.slice(0, 2) : values;
  return hashValue(present.map((v) => v ?? "").join("\u0000")).slice(0, 16);
}

function keyField(spec: CredentialSpec): string {
  return spec.clientAuth === "tls-client-auth" ? "tokenTls.keyFile" : "clientKeyFile";
}

function certificateField(spec: CredentialSpec): string {
  return spec.clientAuth === "tls-client-auth" ? "tokenTls.certFile" : "clientCertificateFile";
}

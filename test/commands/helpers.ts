import { PassThrough } from "node:stream";
import type { ProxyConfig, UpstreamConfig, UpstreamTls } from "../../src/config/types.js";
import type { Emulator } from "../../src/emulator/types.js";
import { makeProxyConfig, makeUpstreamConfig } from "../admin/helpers.js";

export interface Captured {
  stream: PassThrough;
  text: () => string;
}

/** A writable that remembers what was written. */
export function capture(): Captured {
  const stream = new PassThrough();
  const chunks: Buffer[] = [];
  stream.on("data", (chunk: Buffer) => chunks.push(chunk));
  return { stream, text: () => Buffer.concat(chunks).toString("utf8") };
}

export interface EmulatorUpstreamOptions {
  name?: string;
  preview?: boolean;
  clientId?: string;
  clientSecret?: string;
  /** Trust the emulator's CA (default true). */
  trustCa?: boolean;
  serverName?: string;
  tokenPath?: string;
}

/** An upstream config pointing at a running emulator. */
export function emulatorUpstream(
  emulator: Emulator,
  options: EmulatorUpstreamOptions = {},
): UpstreamConfig {
  const tls: UpstreamTls = {
    caFile: options.trustCa === false ? undefined : emulator.caFile,
    certFile: undefined,
    keyFile: undefined,
    serverName: options.serverName,
  };
  const base = makeUpstreamConfig(options.name ?? "emu", { baseUrl: emulator.url });
  const versionHeader = options.preview ? "2026-09-01.scripting.preview" : undefined;
  const tokenPath =
    options.tokenPath ?? (options.preview ? "/oauth2/token" : "/iam/v1/oauth2/token");
  return {
    ...base,
    apiVersion: options.preview ? "scripting-preview" : "default",
    versionHeader,
    tls,
    token: {
      ...base.token,
      tokenUrl: `${emulator.url}${tokenPath}`,
      versionHeader,
      clientId: { kind: "inline", value: options.clientId ?? "demo-client" },
      clientSecret: { kind: "inline", value: options.clientSecret ?? "demo-secret" },
      tls,
    },
  };
}

export function configFor(...upstreams: UpstreamConfig[]): ProxyConfig {
  return makeProxyConfig(upstreams);
}

import { PassThrough } from "node:stream";
import type { ProxyConfig, UpstreamConfig } from "../../src/config/proxy-config.js";
import type { Emulator } from "../../src/emulator/emulator-types.js";
import {
  DEMO_CREDENTIALS,
  makeProxyConfig,
  makeUpstreamConfig,
} from "../helpers/upstream-config.js";

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

/** An upstream config pointing at a running emulator, as the loader would build it. */
export function emulatorUpstream(
  emulator: Emulator,
  options: EmulatorUpstreamOptions = {},
): UpstreamConfig {
  return makeUpstreamConfig(options.name ?? "emu", {
    baseUrl: emulator.url,
    apiVersion: options.preview ? "scripting-preview" : "default",
    ...(options.tokenPath === undefined ? {} : { tokenPath: options.tokenPath }),
    clientId: options.clientId ?? DEMO_CREDENTIALS.clientId,
    clientSecret: options.clientSecret ?? DEMO_CREDENTIALS.clientSecret,
    tls: {
      ...(options.trustCa === false ? {} : { caFile: emulator.caFile }),
      ...(options.serverName === undefined ? {} : { serverName: options.serverName }),
    },
  });
}

export function configFor(...upstreams: UpstreamConfig[]): ProxyConfig {
  return makeProxyConfig(upstreams);
}

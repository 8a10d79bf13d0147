/** `bearer-proxy emulate`: the built-in upstream emulator on its own, until a signal. */
import { readFileSync } from "node:fs";
import { describeEmulator, type EmulatorOptions, startEmulator } from "../emulator/emulator.js";
import type { Emulator } from "../emulator/emulator-types.js";
import { toListenError } from "../net/listen-error.js";
import { cannotListen, emulateListenHint } from "./listen-hints.js";

type Values = Record<string, string | boolean | undefined>;

function intFlag(values: Values, name: string, fallback: number): number {
  const raw = values[name];
  if (typeof raw !== "string") return fallback;
  if (!/^[0-9]+$/.test(raw)) throw new Error(`--${name}: expected a whole number, found "${raw}"`);
  return Number(raw);
}

/** Resolves with the first SIGTERM or SIGINT. */
export function waitForSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const onSignal = (signal: NodeJS.Signals) => {
      process.off("SIGTERM", onSignal);
      process.off("SIGINT", onSignal);
      resolve(signal);
    };
    process.on("SIGTERM", onSignal);
    process.on("SIGINT", onSignal);
  });
}

/** `bearer-proxy emulate`: runs the emulator until a signal; resolves with the exit code. */
export async function emulateCommand(values: Values): Promise<number> {
  const options: EmulatorOptions = {
    host: typeof values.host === "string" ? values.host : "127.0.0.1",
    port: intFlag(values, "port", 8443),
    tokenLifetimeSeconds: intFlag(values, "token-lifetime", 600),
  };
  if (typeof values["client-id"] === "string" || typeof values["client-secret"] === "string") {
    options.clients = [
      {
        clientId: typeof values["client-id"] === "string" ? values["client-id"] : "demo-client",
        clientSecret:
          typeof values["client-secret"] === "string" ? values["client-secret"] : "demo-secret",
      },
    ];
  }
  if (typeof values["ca-out"] === "string") options.caFile = values["ca-out"];
  if (typeof values["cert-file"] === "string" || typeof values["key-file"] === "string") {
    if (typeof values["cert-file"] !== "string" || typeof values["key-file"] !== "string") {
      throw new Error("--cert-file and --key-file go together");
    }
    options.tls = {
      certPem: readFileSync(values["cert-file"], "utf8"),
      keyPem: readFileSync(values["key-file"], "utf8"),
    };
  }
  let emulator: Emulator;
  try {
    emulator = await startEmulator(options);
  } catch (error) {
    const listenError = toListenError(error, { kind: "emulator" }, options.host!, options.port!);
    const line = cannotListen(listenError, emulateListenHint);
    if (line === undefined) throw error;
    process.stderr.write(`bearer-proxy: ${line}\n`);
    return 1;
  }
  process.stdout.write(`${describeEmulator(emulator)}\n`);
  await waitForSignal();
  await emulator.close();
  return 0;
}

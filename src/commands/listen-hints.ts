/**
 * What moves a listener that could not bind, in the words of the command that opened it: `run`
 * names the config key, the environment variable and the flag; `demo` and `emulate` their port
 * flags. Appended to the ListenError's "which listener, which address, why".
 */
import { SETTINGS } from "../config/env-overrides.js";
import { ListenError, type ListenerRole } from "../errors.js";

/** `run`, `validate`'s config: the key in the file, and the variable and flag over it. */
export function runListenHint(listener: ListenerRole): string {
  switch (listener.kind) {
    case "proxy":
      return `move it with listen in the config file, ${SETTINGS.listen.env}=HOST:PORT or ${SETTINGS.listen.flag} HOST:PORT`;
    case "admin":
      return `move it with admin in the config file, ${SETTINGS.adminListen.env}=HOST:PORT or ${SETTINGS.adminListen.flag} HOST:PORT`;
    case "upstream":
      return `move it with ${listener.upstreams.map((u) => `upstreams[${u.index}].listen`).join(" and ")} in the config file`;
    case "emulator":
      return emulateListenHint(listener);
  }
}

/**
 * `bearer-proxy demo`: one port flag per listener; under `npm start` (the README's quickstart)
 * the flag has to follow `--`.
 */
export function demoListenHint(listener: ListenerRole, viaNpmStart = false): string {
  const flag =
    listener.kind === "admin"
      ? "--admin-port"
      : listener.kind === "emulator"
        ? "--emulator-port"
        : "--port";
  return `move it with ${viaNpmStart ? "npm start -- " : ""}${flag} N (0 picks a free port)`;
}

/** `bearer-proxy emulate`: its one listener. */
export function emulateListenHint(_listener: ListenerRole): string {
  return "move it with --port N (0 picks a free port) or --host";
}

/** "cannot start: <which listener, address, why>; <how to move it>", or undefined for other errors. */
export function cannotListen(
  error: unknown,
  hint: (listener: ListenerRole) => string,
): string | undefined {
  return error instanceof ListenError
    ? `cannot start: ${error.message}; ${hint(error.listener)}`
    : undefined;
}

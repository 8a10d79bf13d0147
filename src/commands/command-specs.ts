/**
 * The CLI's commands, their flags and help texts. Commands are imported lazily so
 * `bearer-proxy wait` and `--version` start fast.
 */

export interface OptionSpec {
  name: string;
  type: "string" | "boolean";
  help: string;
  placeholder?: string;
}

export interface CommandSpec {
  summary: string;
  usage: string;
  options: readonly OptionSpec[];
  run(values: Record<string, string | boolean | undefined>): Promise<number>;
}

/** Flags that build the config (flags > env > file > defaults); shared by run, validate, token, check. */
export const CONFIG_OPTIONS: readonly OptionSpec[] = [
  {
    name: "config",
    type: "string",
    placeholder: "FILE",
    help: "YAML config file (env BEARER_PROXY_CONFIG)",
  },
  {
    name: "base-url",
    type: "string",
    placeholder: "URL",
    help: "one-upstream mode: the upstream's https:// base URL",
  },
  {
    name: "api-version",
    type: "string",
    placeholder: "V",
    help: "default | scripting-preview | an X-Version value",
  },
  { name: "client-id", type: "string", placeholder: "ID", help: "OAuth client id" },
  {
    name: "client-id-file",
    type: "string",
    placeholder: "FILE",
    help: "file holding the client id",
  },
  {
    name: "client-secret",
    type: "string",
    placeholder: "S",
    help: "client secret (prefer --client-secret-file: argv is visible in ps)",
  },
  {
    name: "client-secret-file",
    type: "string",
    placeholder: "FILE",
    help: "file holding the client secret (re-read on change)",
  },
  { name: "token-request-format", type: "string", placeholder: "F", help: "form | json" },
  {
    name: "client-auth",
    type: "string",
    placeholder: "M",
    help: "body | basic | private-key-jwt | client-assertion-file | tls-client-auth",
  },
  {
    name: "client-assertion-file",
    type: "string",
    placeholder: "FILE",
    help: "pre-signed JWT for client-assertion-file (read before every token request)",
  },
  {
    name: "ca-file",
    type: "string",
    placeholder: "FILE",
    help: "extra CA (PEM) trusted for the upstream and token endpoint",
  },
  {
    name: "listen",
    type: "string",
    placeholder: "HOST:PORT",
    help: "proxy listener (default 127.0.0.1:8080)",
  },
  {
    name: "admin-listen",
    type: "string",
    placeholder: "HOST:PORT",
    help: "admin listener (default 127.0.0.1:9901)",
  },
  {
    name: "log-level",
    type: "string",
    placeholder: "L",
    help: "trace | debug | info | warn | error | silent",
  },
  { name: "log-format", type: "string", placeholder: "F", help: "json | pretty" },
];

/** A duration flag, with an error that names the flag rather than a bare parse failure. */
function durationFlag(name: string, value: string, parse: (v: string) => number): number {
  try {
    return parse(value);
  } catch {
    throw new Error(`--${name}: expected a duration such as "30s" or "500ms", found "${value}"`);
  }
}

const str = (v: string | boolean | undefined): string | undefined =>
  typeof v === "string" ? v : undefined;

export const COMMANDS = {
  run: {
    summary: "run the proxy (the default command)",
    usage: "bearer-proxy [run] [--config FILE] [flags]",
    options: CONFIG_OPTIONS,
    run: async (v) => (await import("./run.js")).runCommand(v),
  },
  demo: {
    summary: "start the upstream emulator and a proxy pointed at it, and print curl lines to try",
    usage: "bearer-proxy demo [--port N] [--admin-port N] [--emulator-port N]",
    options: [
      { name: "port", type: "string", placeholder: "N", help: "proxy port (default 8080)" },
      { name: "admin-port", type: "string", placeholder: "N", help: "admin port (default 9901)" },
      {
        name: "emulator-port",
        type: "string",
        placeholder: "N",
        help: "emulator HTTPS port (default 8443)",
      },
      {
        name: "log-format",
        type: "string",
        placeholder: "F",
        help: "json | pretty (default pretty on a terminal)",
      },
    ],
    run: async (v) => (await import("./demo.js")).demoCommand(v),
  },
  emulate: {
    summary: "start the built-in upstream emulator (HTTPS) on its own",
    usage: "bearer-proxy emulate [--port N] [--host H] [--token-lifetime 600]",
    options: [
      { name: "host", type: "string", placeholder: "H", help: "interface (default 127.0.0.1)" },
      { name: "port", type: "string", placeholder: "N", help: "HTTPS port (default 8443)" },
      {
        name: "token-lifetime",
        type: "string",
        placeholder: "SECONDS",
        help: "token lifetime (default 600; expires_in is one less)",
      },
      {
        name: "client-id",
        type: "string",
        placeholder: "ID",
        help: "accepted client id (default demo-client)",
      },
      {
        name: "client-secret",
        type: "string",
        placeholder: "S",
        help: "accepted client secret (default demo-secret)",
      },
      {
        name: "ca-out",
        type: "string",
        placeholder: "FILE",
        help: "where to write the generated CA (default a temp file)",
      },
      {
        name: "cert-file",
        type: "string",
        placeholder: "FILE",
        help: "serve this certificate instead of generating one",
      },
      { name: "key-file", type: "string", placeholder: "FILE", help: "key for --cert-file" },
    ],
    run: async (v) => (await import("./emulate.js")).emulateCommand(v),
  },
  validate: {
    summary: "load and check a config; print every problem; exit non-zero if any",
    usage: "bearer-proxy validate --config FILE [flags]",
    options: CONFIG_OPTIONS,
    run: async (v) => (await import("./validate.js")).validateCommand(v),
  },
  wait: {
    summary: "exit 0 as soon as the proxy is ready (for apps that must start after their sidecar)",
    usage: "bearer-proxy wait [--admin http://127.0.0.1:9901] [--timeout 30s]",
    options: [
      {
        name: "admin",
        type: "string",
        placeholder: "URL",
        help: "admin base URL (default http://127.0.0.1:9901)",
      },
      {
        name: "timeout",
        type: "string",
        placeholder: "DURATION",
        help: "give up after this long (default 30s)",
      },
    ],
    run: async (v) => {
      const { runWait } = await import("./wait.js");
      const { parseDurationMs } = await import("../config/units.js");
      return runWait({
        adminUrl: str(v.admin) ?? "http://127.0.0.1:9901",
        timeoutMs: durationFlag("timeout", str(v.timeout) ?? "30s", parseDurationMs),
      });
    },
  },
  token: {
    summary: "print a fresh access token to stdout (nothing else goes to stdout)",
    usage: "bearer-proxy token [--upstream NAME] [--config FILE] [flags]",
    options: [
      ...CONFIG_OPTIONS,
      { name: "upstream", type: "string", placeholder: "NAME", help: "which upstream" },
    ],
    run: async (v) => (await import("./config-commands.js")).tokenCommand(v),
  },
  check: {
    summary: "diagnose each upstream step by step: DNS, TCP, TLS, token, optional API call",
    usage: "bearer-proxy check [--config FILE] [--upstream NAME] [--probe-path /path]",
    options: [
      ...CONFIG_OPTIONS,
      { name: "upstream", type: "string", placeholder: "NAME", help: "only this upstream" },
      {
        name: "probe-path",
        type: "string",
        placeholder: "PATH",
        help: "also GET this path (as a client sends it to the proxy) at the upstreams it routes to",
      },
    ],
    run: async (v) => (await import("./config-commands.js")).checkCommand(v),
  },
  "intercept-ca": {
    summary:
      "print the CONNECT interception CA certificate for clients to trust, or make one with --generate",
    usage:
      "bearer-proxy intercept-ca [--config FILE] [flags] | bearer-proxy intercept-ca --generate DIR",
    options: [
      ...CONFIG_OPTIONS,
      {
        name: "generate",
        type: "string",
        placeholder: "DIR",
        help: "make a CA for local use (EC P-256, 2 years) in DIR: intercept-ca.pem, intercept-ca-key.pem (mode 0600); never overwrites",
      },
    ],
    run: async (v) => (await import("./intercept-ca.js")).interceptCaCommand(v),
  },
  "code-cache": {
    summary:
      "save V8's code cache beside the bundle, so later starts on this Node compile less (the image does this when built)",
    usage: "bearer-proxy code-cache",
    options: [],
    run: async () => (await import("./code-cache.js")).codeCacheCommand(),
  },
} satisfies Record<string, CommandSpec>;

export type CommandName = keyof typeof COMMANDS;

function optionLines(options: readonly OptionSpec[]): string {
  const rows = options.map(
    (o) => [`--${o.name}${o.placeholder ? ` ${o.placeholder}` : ""}`, o.help] as const,
  );
  const width = Math.max(...rows.map(([flag]) => flag.length), 14);
  return rows.map(([flag, help]) => `  ${flag.padEnd(width)}  ${help}`).join("\n");
}

/** `bearer-proxy <command> --help`. */
export function commandHelp(name: CommandName): string {
  const spec: CommandSpec = COMMANDS[name];
  const common: OptionSpec[] = [
    { name: "help", type: "boolean", help: "show this help" },
    { name: "version", type: "boolean", help: "print the version" },
  ];
  return `${spec.summary}\n\nUsage: ${spec.usage}\n\nOptions:\n${optionLines([...spec.options, ...common])}\n`;
}

/** `bearer-proxy --help`: every command with its summary. */
export function mainHelp(): string {
  const names = Object.keys(COMMANDS) as CommandName[];
  const width = Math.max(...names.map((n) => n.length));
  const lines = names.map((n) => `  ${n.padEnd(width)}  ${COMMANDS[n].summary}`);
  return [
    "bearer-proxy: an authenticating reverse proxy that injects OAuth 2.0 client-credentials tokens.",
    "",
    "Usage: bearer-proxy <command> [options]",
    "",
    "Commands:",
    ...lines,
    "",
    "Run `bearer-proxy <command> --help` for a command's options.",
    "",
  ].join("\n");
}

#!/usr/bin/env node
/**
 * `bearer-proxy <command>`: argv -> options, then hands over to src/commands/. Unknown flags are
 * errors (they are usually typos); every command answers --help and --version.
 */
import { type ParseArgsConfig, parseArgs } from "node:util";
import {
  COMMANDS,
  type CommandName,
  type CommandSpec,
  commandHelp,
  mainHelp,
} from "./commands/command-specs.js";
import { suggest } from "./config/suggest.js";
import { errorMessage } from "./errors.js";
import { VERSION } from "./version.js";

type ParsedValues = Record<string, string | boolean | undefined>;

function isCommand(name: string): name is CommandName {
  return Object.hasOwn(COMMANDS, name);
}

function parseCommandArgs(name: CommandName, spec: CommandSpec, args: string[]): ParsedValues {
  const options: ParseArgsConfig["options"] = {
    help: { type: "boolean", short: "h" },
    version: { type: "boolean", short: "v" },
  };
  for (const option of spec.options) {
    options[option.name] = { type: option.type };
  }
  // Before the strict parse: its text for an unknown option names no fix.
  const unknown = unknownOption(options, args);
  if (unknown !== undefined) throw new Error(unknownOptionMessage(name, unknown));
  const { values, positionals } = parseArgs({
    args,
    options,
    strict: true,
    allowPositionals: true,
  });
  if (positionals.length > 0) {
    throw new Error(`unexpected argument "${positionals[0]}" (options start with --)`);
  }
  return values as ParsedValues;
}

/** The first option in `args` that `options` does not define, as written ("--porr", "-x"). */
function unknownOption(options: ParseArgsConfig["options"], args: string[]): string | undefined {
  const { tokens } = parseArgs({
    args,
    options,
    strict: false,
    allowPositionals: true,
    tokens: true,
  });
  for (const token of tokens) {
    if (token.kind === "option" && !Object.hasOwn(options ?? {}, token.name)) return token.rawName;
  }
  return undefined;
}

/**
 * "unknown option --porr (did you mean --port?)", as config keys get; for an option of other
 * commands (`demo --config`), which commands take it.
 */
function unknownOptionMessage(command: CommandName, rawName: string): string {
  const text = `unknown option ${rawName}`;
  if (!rawName.startsWith("--")) return text;
  const name = rawName.slice(2);
  const own = [...COMMANDS[command].options.map((o) => o.name), "help", "version"];
  const near = suggest(name, own);
  if (near !== undefined) return `${text} (did you mean --${near}?)`;
  const others = (Object.keys(COMMANDS) as CommandName[]).filter(
    (other) => other !== command && COMMANDS[other].options.some((o) => o.name === name),
  );
  if (others.length === 0) return text;
  const list =
    others.length === 1 ? others[0] : `${others.slice(0, -1).join(", ")} and ${others.at(-1)}`;
  return `${text} (an option of ${list}, not of ${command})`;
}

export async function runCli(argv: string[]): Promise<number> {
  let rest = argv;
  let commandName: CommandName = "run";
  const first = rest[0];
  if (first !== undefined && !first.startsWith("-")) {
    if (first === "help") {
      const topic = rest[1];
      if (topic !== undefined && !isCommand(topic)) {
        process.stderr.write(`bearer-proxy: unknown command "${topic}"\n\n${mainHelp()}`);
        return 2;
      }
      process.stdout.write(topic ? commandHelp(topic) : mainHelp());
      return 0;
    }
    if (!isCommand(first)) {
      process.stderr.write(`bearer-proxy: unknown command "${first}"\n\n${mainHelp()}`);
      return 2;
    }
    commandName = first;
    rest = rest.slice(1);
  } else if (rest.includes("--help") || rest.includes("-h")) {
    // `bearer-proxy --help` is the overview, not `run --help`.
    process.stdout.write(mainHelp());
    return 0;
  }
  const spec = COMMANDS[commandName];
  let values: ParsedValues;
  try {
    values = parseCommandArgs(commandName, spec, rest);
  } catch (err) {
    process.stderr.write(
      `bearer-proxy ${commandName}: ${(err as Error).message}\n\n${commandHelp(commandName)}`,
    );
    return 2;
  }
  if (values.version) {
    process.stdout.write(`bearer-proxy ${VERSION}\n`);
    return 0;
  }
  if (values.help) {
    process.stdout.write(commandHelp(commandName));
    return 0;
  }
  return spec.run(values);
}

runCli(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
    // Long-running commands resolve only after a graceful shutdown; a stray keep-alive socket
    // must not keep the process up after that.
    setTimeout(() => process.exit(code), 2_000).unref();
  },
  (err: unknown) => {
    process.stderr.write(`bearer-proxy: ${errorMessage(err)}\n`);
    process.exitCode = 1;
    // Whatever the failed command left open must not keep the process up either.
    setTimeout(() => process.exit(1), 2_000).unref();
  },
);

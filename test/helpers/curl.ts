/**
 * Real command-line clients against the emulator: run curl (or sh, bash) as a child process with
 * a clean environment (PATH only, so no proxy variables or ~/.curlrc), never throwing on a
 * non-zero exit; and the curl arguments of the requests every such test starts with.
 */
import { execFile } from "node:child_process";
import { DEMO_CLIENT } from "../../src/emulator/emulator.js";

export interface Run {
  /** Exit code; -1 when the program did not exit by itself (timeout, signal). */
  code: number;
  stdout: string;
  stderr: string;
}

/** Run `file` with `args`; resolves with its exit code and output, whatever the code. */
export function exec(file: string, args: string[], timeoutMs = 15_000): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      file,
      args,
      { env: { PATH: process.env.PATH ?? "/usr/bin:/bin" }, timeout: timeoutMs },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === "number" ? error.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** `curl -sS …args`. */
export function curl(args: string[], timeoutMs?: number): Promise<Run> {
  return exec("curl", ["-sS", ...args], timeoutMs);
}

/** `curl` that also reports the HTTP status: the body and the status, split. */
export async function curlWithStatus(
  args: string[],
): Promise<Run & { body: string; status: string }> {
  const run = await curl(["-w", "\n%{http_code}", ...args]);
  const newline = run.stdout.lastIndexOf("\n");
  return { ...run, body: run.stdout.slice(0, newline), status: run.stdout.slice(newline + 1) };
}

/**
 * The arguments of a client-credentials token request to the emulator's default token endpoint,
 * a form body with its charset (the demo client; `clientSecret` to send another secret).
 */
export function tokenRequestArgs(
  url: string,
  caFile: string,
  clientSecret: string = DEMO_CLIENT.clientSecret,
): string[] {
  return [
    "--cacert",
    caFile,
    "-X",
    "POST",
    `${url}/iam/v1/oauth2/token`,
    "-H",
    "Content-Type: application/x-www-form-urlencoded;charset=UTF-8",
    "--data",
    `grant_type=client_credentials&client_id=${DEMO_CLIENT.clientId}&client_secret=${clientSecret}`,
  ];
}

/** The arguments of a GET of `url` with a bearer `token`, trusting `caFile`. */
export function bearerGetArgs(url: string, caFile: string, token: string): string[] {
  return ["--cacert", caFile, "-H", `Authorization: Bearer ${token}`, url];
}

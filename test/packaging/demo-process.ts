/** `bearer-proxy demo` as a user starts it from an installed copy: a process on free ports. */
import { type ChildProcess, spawn } from "node:child_process";
import { expect } from "vitest";

/**
 * Start `command… demo` (e.g. `[node, cli]`, or a single executable alone) on free ports in
 * `cwd`, and resolve the proxy's URL once it printed it.
 */
export function startDemo(
  command: readonly string[],
  cwd: string,
): Promise<{ child: ChildProcess; proxyUrl: string; output: () => string }> {
  const [file = "", ...args] = command;
  const child = spawn(
    file,
    [
      ...args,
      "demo",
      ...["--port", "0", "--admin-port", "0", "--emulator-port", "0", "--log-format", "json"],
    ],
    { cwd, stdio: ["ignore", "pipe", "pipe"] },
  );
  let output = "";
  return new Promise((resolvePromise, reject) => {
    const timer = setTimeout(() => reject(new Error(`demo did not start:\n${output}`)), 20_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      const match = /proxy \(plain HTTP[^)]*\): (http:\/\/127\.0\.0\.1:\d+)/.exec(output);
      if (match?.[1]) {
        clearTimeout(timer);
        resolvePromise({ child, proxyUrl: match[1], output: () => output });
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", onData);
    child.on("exit", (code) => reject(new Error(`demo exited with ${code}:\n${output}`)));
  });
}

/** The demo answers through the proxy (token injected by the emulator's rules) and stops cleanly on SIGTERM. */
export async function exerciseDemo(command: readonly string[], cwd: string): Promise<string> {
  const demo = await startDemo(command, cwd);
  try {
    const sheet = await fetch(`${demo.proxyUrl}/platform/v1/spreadsheets/demo`);
    expect(sheet.status).toBe(200);
    expect(((await sheet.json()) as { id?: string }).id).toBe("demo");
    const scripts = await fetch(`${demo.proxyUrl}/scripts`);
    expect(scripts.status).toBe(200);
  } finally {
    const exited = new Promise<number | null>((r) => demo.child.once("exit", r));
    demo.child.kill("SIGTERM");
    expect(await exited).toBe(0);
  }
  return demo.output();
}

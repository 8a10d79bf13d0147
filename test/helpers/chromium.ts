/**
 * Debian's Chromium for the browser tests, launched the way this machine allows: headless, no
 * sandbox (root), and none of the background networking a closed network refuses.
 */
import { existsSync } from "node:fs";
import { type Browser, chromium } from "playwright-core";

export const CHROMIUM = "/usr/bin/chromium";

/** Locally the tests need Debian's chromium; in CI (.ci/run installs it) they must never skip. */
export const skipWithoutChromium = !existsSync(CHROMIUM) && !process.env.CI;

/**
 * Playwright gives a launch 30 s, as much as a whole hook by default; on a loaded CI machine (four
 * test workers on two cores) a launch gets 90 s, and the hooks that call it allow 120 s.
 */
const LAUNCH_TIMEOUT_MS = 90_000;

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    timeout: LAUNCH_TIMEOUT_MS,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}

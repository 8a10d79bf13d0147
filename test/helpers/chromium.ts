/**
 * Debian's Chromium for the browser tests, launched the way this machine allows: headless, no
 * sandbox (root), and none of the background networking a closed network refuses.
 */
import { existsSync } from "node:fs";
import { type Browser, chromium } from "playwright-core";

export const CHROMIUM = "/usr/bin/chromium";

/** Locally the tests need Debian's chromium; in CI (.ci/run installs it) they must never skip. */
export const skipWithoutChromium = !existsSync(CHROMIUM) && !process.env.CI;

export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
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

/**
 * External tools the bench uses when it can: wrk (load) and nginx (the reference proxy), both
 * from Debian. Installed with apt-get when missing and allowed; otherwise reported as missing so
 * the bench falls back (Node load generator) or skips (nginx) and says so.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";

const INSTALL_TIMEOUT_MS = 300_000;

function which(name, extraPaths = []) {
  for (const path of extraPaths) if (existsSync(path)) return path;
  try {
    return execFileSync("sh", ["-c", `command -v ${name}`], { encoding: "utf8" }).trim() || null;
  } catch {
    return null;
  }
}

function versionOf(file, args) {
  const result = spawnSync(file, args, { encoding: "utf8", timeout: 5000 });
  const text = `${result.stdout ?? ""}${result.stderr ?? ""}`.trim();
  return text.split("\n")[0] ?? "";
}

function canApt() {
  return process.getuid?.() === 0 && which("apt-get") !== null;
}

function aptInstall(packages, log) {
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  const install = () =>
    spawnSync(
      "apt-get",
      [
        "-o",
        "DPkg::Lock::Timeout=120",
        "install",
        "-y",
        "-qq",
        "--no-install-recommends",
        ...packages,
      ],
      { env, encoding: "utf8", timeout: INSTALL_TIMEOUT_MS },
    );
  log(`installing ${packages.join(" ")} with apt-get …`);
  let result = install();
  if (result.status !== 0) {
    // A fresh machine has no package lists yet.
    spawnSync("apt-get", ["-o", "DPkg::Lock::Timeout=120", "update", "-qq"], {
      env,
      encoding: "utf8",
      timeout: INSTALL_TIMEOUT_MS,
    });
    result = install();
  }
  if (result.status !== 0) {
    log(
      `apt-get install ${packages.join(" ")} failed: ${(result.stderr ?? "").trim().slice(-400)}`,
    );
  }
  return result.status === 0;
}

/**
 * Find wrk and nginx, installing the missing ones when `install` is true and apt-get is usable.
 * @returns {{wrk: {path: string|null, version: string, note: string},
 *   nginx: {path: string|null, version: string, note: string}}}
 */
export function ensureTools({ install, log, wantNginx = true }) {
  const find = {
    wrk: () => which("wrk", ["/usr/bin/wrk"]),
    nginx: () => which("nginx", ["/usr/sbin/nginx"]),
  };
  const missing = [];
  if (!find.wrk()) missing.push("wrk");
  if (wantNginx && !find.nginx()) missing.push("nginx-light");
  const notes = {};
  if (missing.length > 0) {
    if (!install) {
      for (const name of missing) notes[name] = "missing (install disabled)";
    } else if (!canApt()) {
      for (const name of missing) notes[name] = "missing (apt-get unavailable or not root)";
    } else if (!aptInstall(missing, log) && missing.includes("nginx-light")) {
      // nginx-light is gone from some releases; plain nginx has the same modules we use.
      aptInstall(["nginx"], log);
    }
  }
  const wrkPath = find.wrk();
  const nginxPath = wantNginx ? find.nginx() : null;
  return {
    wrk: {
      path: wrkPath,
      version: wrkPath ? versionOf(wrkPath, ["-v"]) : "",
      note: wrkPath ? "" : (notes.wrk ?? "missing (install failed)"),
    },
    nginx: {
      path: nginxPath,
      version: nginxPath ? versionOf(nginxPath, ["-v"]) : "",
      note: nginxPath
        ? ""
        : wantNginx
          ? (notes["nginx-light"] ?? "missing (install failed)")
          : "not requested",
    },
  };
}

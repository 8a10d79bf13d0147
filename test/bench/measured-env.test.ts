/**
 * Issue 33: the processes the bench measures run without the host's NODE_EXTRA_CA_CERTS (the
 * image sets none; a host's makes every start with `tls.caFile` parse that bundle), unless a cell
 * passes one itself. A child Node imports the module with the variable set, as a host would.
 */
import { execFileSync } from "node:child_process";
import { describe, expect, it } from "vitest";

const MODULE = new URL("../../bench/lib/measured-env.mjs", import.meta.url).href;

function measuredFrom(hostEnv: Record<string, string>, extra: Record<string, string>) {
  // Set inside the child before the import (as a host's shell would have): a NODE_EXTRA_CA_CERTS
  // in the child's own environment would make Node load that file at its start.
  const script = `Object.assign(process.env, ${JSON.stringify(hostEnv)});
const m = await import(${JSON.stringify(MODULE)});
process.stdout.write(JSON.stringify({ host: m.HOST_EXTRA_CA_CERTS ?? null, env: m.measuredEnv(${JSON.stringify(extra)}) }));`;
  const out = execFileSync(process.execPath, ["--input-type=module", "-e", script], {
    env: { PATH: process.env.PATH ?? "" },
    encoding: "utf8",
  });
  return JSON.parse(out) as { host: string | null; env: Record<string, string> };
}

describe("bench/lib/measured-env.mjs", () => {
  it("leaves the host's NODE_EXTRA_CA_CERTS out and keeps the rest, extra on top", () => {
    const { host, env } = measuredFrom(
      { NODE_EXTRA_CA_CERTS: "/etc/host-bundle.pem", KEPT: "yes", OVERRIDDEN: "host" },
      { OVERRIDDEN: "cell" },
    );
    expect(host).toBe("/etc/host-bundle.pem");
    expect(env.NODE_EXTRA_CA_CERTS).toBeUndefined();
    expect(env.KEPT).toBe("yes");
    expect(env.OVERRIDDEN).toBe("cell");
  });

  it("passes NODE_EXTRA_CA_CERTS when a cell asks for it", () => {
    const { env } = measuredFrom(
      { NODE_EXTRA_CA_CERTS: "/etc/host-bundle.pem" },
      { NODE_EXTRA_CA_CERTS: "/tmp/cell.pem" },
    );
    expect(env.NODE_EXTRA_CA_CERTS).toBe("/tmp/cell.pem");
  });

  it("says nothing left out where the host sets none", () => {
    expect(measuredFrom({}, {}).host).toBeNull();
  });
});

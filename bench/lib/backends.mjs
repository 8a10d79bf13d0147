/**
 * What every load script runs behind the proxies it measures: the bench's certificates, the
 * upstream's control client, the upstream (nginx when `nginxPath` is given, else the Node one)
 * and the token emulator, the last two pinned to `core` (the load generator's) when not null.
 */
import { startEmulatorProcess } from "./bearer-proxy.mjs";
import { createBenchCertificates } from "./certs.mjs";
import { createControlClient } from "./control-client.mjs";
import { startUpstream } from "./upstreams.mjs";

export async function startBackends({ dir, core, nginxPath }) {
  const certs = await createBenchCertificates(dir);
  const control = createControlClient(certs.caPem);
  const upstream = await startUpstream({ core, certs, control, nginxPath, dir });
  const emulator = await startEmulatorProcess({ core, certs });
  return { certs, control, upstream, emulator };
}

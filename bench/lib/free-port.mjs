/**
 * A port to hand to a process that binds it later (a child proxy, a baseline, nginx, a restarted
 * server), for the bench and the test suite alike (test/helpers/free-port.ts).
 *
 * A port that `listen(0)` returned and released can be handed to the next `listen(0)`, or taken
 * as the local port of an outgoing connection, before the child binds it: the suite runs many
 * servers in parallel, and the bench's own clients open connections all the time. So the port
 * comes from below the kernel's ephemeral range (`/proc/sys/net/ipv4/ip_local_port_range`),
 * where neither ever goes; it is checked free by binding it, and drawn again if taken. Only
 * another caller of this helper could collide, one in thousands of ports.
 */
import { readFileSync } from "node:fs";
import { createServer } from "node:net";

/** Lowest port of the ephemeral range (Linux default 32768; the IANA one elsewhere). */
function ephemeralLow() {
  try {
    const low = Number(
      readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").split(/\s+/)[0],
    );
    if (Number.isInteger(low) && low > 2_048) return low;
  } catch {
    // Not Linux.
  }
  return 49_152;
}

const LOWEST = 1_025;

function bindable(port) {
  return new Promise((resolve) => {
    const server = createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/** A free port below the ephemeral range, on 127.0.0.1. @returns {Promise<number>} */
export async function freePort() {
  const high = ephemeralLow();
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = LOWEST + Math.floor(Math.random() * (high - LOWEST));
    if (await bindable(port)) return port;
  }
  throw new Error(`no free port found below ${high} in 100 draws`);
}

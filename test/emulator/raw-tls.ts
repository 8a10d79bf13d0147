import { connect } from "node:tls";
import type { Emulator } from "../../src/emulator/emulator-types.js";

/**
 * Send bytes exactly as given over TLS and collect whatever comes back until the server closes
 * the connection or `idleMs` passes without data. For requests no well-behaved client would send.
 */
export function rawExchange(
  emulator: Emulator,
  payload: string | Buffer,
  idleMs = 500,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({
      host: "127.0.0.1",
      port: emulator.port,
      ca: emulator.caPem,
      servername: "localhost",
    });
    const chunks: Buffer[] = [];
    const done = () => {
      socket.destroy();
      resolve(Buffer.concat(chunks).toString("latin1"));
    };
    socket.setTimeout(idleMs, done);
    socket.on("secureConnect", () => socket.write(payload));
    socket.on("data", (chunk: Buffer) => chunks.push(chunk));
    socket.on("end", done);
    socket.on("close", done);
    socket.on("error", (error: NodeJS.ErrnoException) => {
      // A reset after the answer arrived still delivered the answer.
      if (chunks.length > 0 || error.code === "ECONNRESET") done();
      else reject(error);
    });
  });
}

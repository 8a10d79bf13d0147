// The upstream of test/helpers/limited-upstream.ts in a process of its own (see
// limited-upstream-process.ts): at most `limit` accepted requests in any rolling window of
// `windowMs`, 429 with Retry-After beyond. Its arrivals are timed on its own event loop, so the
// proxy's work on a burst (parsing a hundred requests at once) does not show up as bunching.
import { createServer } from "node:https";

let server;
let arrivals = [];
let inWindow = [];
let accepted = 0;
let rejected = 0;
let settings;

function handle(req, res) {
  const nowMs = performance.now();
  arrivals.push(nowMs);
  while (inWindow.length > 0 && inWindow[0] <= nowMs - settings.windowMs) inWindow.shift();
  req.resume();
  if (inWindow.length >= settings.limit) {
    rejected++;
    const waitMs = inWindow[0] + settings.windowMs - nowMs;
    const body = JSON.stringify({ error: "rate_limited" });
    res.writeHead(429, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(body),
      "retry-after": String(Math.max(1, Math.ceil(waitMs / 1000))),
    });
    res.end(body);
    return;
  }
  inWindow.push(nowMs);
  accepted++;
  res.writeHead(200, { "content-type": "text/plain", "content-length": 2 });
  res.end("ok");
}

process.on("message", (message) => {
  if (message.cmd === "start") {
    settings = { limit: message.limit, windowMs: message.windowMs };
    server = createServer({ cert: message.certPem, key: message.keyPem }, handle);
    server.listen(0, "127.0.0.1", () => process.send({ port: server.address().port }));
  } else if (message.cmd === "stats") {
    process.send({ arrivals, accepted, rejected });
  } else if (message.cmd === "reset") {
    arrivals = [];
    inWindow = [];
    accepted = 0;
    rejected = 0;
    process.send({ ok: true });
  }
});
// The parent went away (a test worker killed mid-run): go too.
process.on("disconnect", () => process.exit(0));

/**
 * The floor of a sidecar's start (issue 33), run the way bench/start-ab.mjs runs a CLI
 * (`node start-floor.cjs run`, configured from the same BEARER_PROXY_* environment): what any
 * proxy must do before it is ready, and nothing else — Node's start, an HTTP listener and an admin
 * listener, and one client-credentials token request over TLS, verified against what bearer-proxy
 * trusts with `tls.caFile` (Node's roots plus the file, built the way src/net/dispatcher.ts
 * `rootsPlus` builds it). `/readyz` answers 200 once the token came back 200.
 * CommonJS `require("node:http")`: on Node 24 an ES import of it loads Node's bundled undici.
 */
const { readFileSync } = require("node:fs");
const http = require("node:http");
const https = require("node:https");
const tls = require("node:tls");

const env = process.env;
const hostPort = (text) => {
  const at = text.lastIndexOf(":");
  return { host: text.slice(0, at), port: Number(text.slice(at + 1)) };
};

const secureContext = tls.createSecureContext({ minVersion: "TLSv1.2" });
secureContext.context.addCACert(readFileSync(env.BEARER_PROXY_CA_FILE, "utf8"));

let ready = false;
const answer = (req, res) => {
  res.statusCode = req.url === "/readyz" && !ready ? 503 : 200;
  res.end();
};
const admin = hostPort(env.BEARER_PROXY_ADMIN_LISTEN);
const proxy = hostPort(env.BEARER_PROXY_LISTEN);
http.createServer(answer).listen(proxy.port, proxy.host);
http.createServer(answer).listen(admin.port, admin.host, () => {
  const secret = readFileSync(env.BEARER_PROXY_CLIENT_SECRET_FILE, "utf8").trim();
  const body = new URLSearchParams({
    grant_type: "client_credentials",
    client_id: env.BEARER_PROXY_CLIENT_ID,
    client_secret: secret,
  }).toString();
  const request = https.request(
    `${env.BEARER_PROXY_BASE_URL}/iam/v1/oauth2/token`,
    {
      method: "POST",
      secureContext,
      headers: {
        "content-type": "application/x-www-form-urlencoded;charset=UTF-8",
        "content-length": Buffer.byteLength(body),
      },
    },
    (res) => {
      res.resume();
      res.on("end", () => {
        ready = res.statusCode === 200;
        if (!ready)
          process.stderr.write(`start-floor: token endpoint answered ${res.statusCode}\n`);
      });
    },
  );
  request.on("error", (err) => process.stderr.write(`start-floor: ${err.message}\n`));
  request.end(body);
});
process.on("SIGTERM", () => process.exit(0));

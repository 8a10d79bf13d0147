/**
 * A real git smart-HTTP server for the interception tests: `git http-backend` (git's own CGI
 * program) behind an HTTPS handler, serving a bare repository with one commit. A `git clone`
 * through a terminated CONNECT then does what it does against any git host: GET
 * `info/refs?service=git-upload-pack`, then POST `git-upload-pack` with a (possibly gzipped) body.
 */
import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { join } from "node:path";

/** What the one commit holds: `README.md` with this text. */
export const GIT_README = "served by git http-backend through bearer-proxy\n";

const quiet = { stdio: "ignore" as const };

/** A bare repository `<root>/repo.git` with one commit on `main`; returns `root`. */
export function makeBareRepository(root: string): string {
  const work = join(root, "work");
  mkdirSync(work, { recursive: true });
  const env = {
    ...process.env,
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_AUTHOR_NAME: "test",
    GIT_AUTHOR_EMAIL: "test@example.test",
    GIT_COMMITTER_NAME: "test",
    GIT_COMMITTER_EMAIL: "test@example.test",
  };
  const git = (args: string[], cwd: string) => execFileSync("git", args, { cwd, env, ...quiet });
  git(["init", "-q", "-b", "main"], work);
  writeFileSync(join(work, "README.md"), GIT_README);
  git(["add", "README.md"], work);
  git(["commit", "-q", "-m", "first"], work);
  git(["clone", "-q", "--bare", work, join(root, "repo.git")], root);
  return root;
}

/** A request handler running `git http-backend` (CGI, RFC 3875) over the repositories in `root`. */
export function gitHttpBackend(root: string) {
  return (req: IncomingMessage, res: ServerResponse): void => {
    const url = new URL(req.url ?? "/", "https://git.invalid");
    const header = (name: string) => {
      const value = req.headers[name];
      return typeof value === "string" ? value : "";
    };
    const child = spawn("git", ["http-backend"], {
      env: {
        PATH: process.env.PATH,
        GIT_PROJECT_ROOT: root,
        GIT_HTTP_EXPORT_ALL: "1",
        GIT_CONFIG_NOSYSTEM: "1",
        GIT_CONFIG_GLOBAL: "/dev/null",
        REQUEST_METHOD: req.method ?? "GET",
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        CONTENT_TYPE: header("content-type"),
        ...(req.headers["content-length"] ? { CONTENT_LENGTH: header("content-length") } : {}),
        HTTP_CONTENT_ENCODING: header("content-encoding"),
        GIT_PROTOCOL: header("git-protocol"),
        REMOTE_ADDR: req.socket.remoteAddress ?? "",
      },
    });
    req.pipe(child.stdin);
    child.stdin.on("error", () => {});
    let head = Buffer.alloc(0);
    let headDone = false;
    child.stdout.on("data", (chunk: Buffer) => {
      if (headDone) {
        res.write(chunk);
        return;
      }
      head = Buffer.concat([head, chunk]);
      const crlf = head.indexOf("\r\n\r\n");
      const lf = head.indexOf("\n\n");
      const end = crlf !== -1 ? crlf : lf;
      if (end === -1) return;
      headDone = true;
      let status = 200;
      for (const line of head.subarray(0, end).toString("latin1").split(/\r?\n/)) {
        const colon = line.indexOf(":");
        const name = line.slice(0, colon).trim();
        const value = line.slice(colon + 1).trim();
        if (name.toLowerCase() === "status") status = Number(value.split(" ")[0]);
        else res.setHeader(name, value);
      }
      res.statusCode = status;
      res.write(head.subarray(end + (crlf !== -1 ? 4 : 2)));
    });
    child.stdout.on("end", () => res.end());
    child.on("error", () => {
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  };
}

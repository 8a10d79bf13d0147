/**
 * The part of the `ws` package's API the protocol tests use (the package ships no types and
 * @types/ws is not a dependency). Signatures follow ws 8's documentation (doc/ws.md).
 */
declare module "ws" {
  import type { EventEmitter } from "node:events";
  import type { Agent, ClientRequest, Server as HttpServer, IncomingMessage } from "node:http";
  import type { Server as HttpsServer } from "node:https";

  type RawData = Buffer | ArrayBuffer | Buffer[];

  export interface ClientOptions {
    headers?: Record<string, string>;
    agent?: Agent;
    handshakeTimeout?: number;
    perMessageDeflate?: boolean;
    finishRequest?: (request: ClientRequest, websocket: WebSocket) => void;
    /** Passed on to http.request: the connection's source address. */
    localAddress?: string;
    /** Makes the connection (a TLS socket over a CONNECT tunnel, say); default net/tls connect. */
    createConnection?: (options: object) => import("node:net").Socket;
  }

  export class WebSocket extends EventEmitter {
    static readonly OPEN: 1;
    static readonly CLOSED: 3;
    constructor(address: string, protocols?: string | string[], options?: ClientOptions);
    constructor(address: string, options?: ClientOptions);
    readonly readyState: 0 | 1 | 2 | 3;
    readonly protocol: string;
    send(
      data: string | Buffer | ArrayBuffer | Buffer[],
      options?: { binary?: boolean },
      cb?: (err?: Error) => void,
    ): void;
    send(data: string | Buffer, cb?: (err?: Error) => void): void;
    close(code?: number, reason?: string): void;
    terminate(): void;
    pause(): void;
    resume(): void;
    on(event: "open", listener: () => void): this;
    on(event: "message", listener: (data: RawData, isBinary: boolean) => void): this;
    on(event: "close", listener: (code: number, reason: Buffer) => void): this;
    on(event: "error", listener: (err: Error) => void): this;
    on(event: "upgrade", listener: (response: IncomingMessage) => void): this;
    on(
      event: "unexpected-response",
      listener: (request: ClientRequest, response: IncomingMessage) => void,
    ): this;
    once(event: string, listener: (...args: never[]) => void): this;
  }

  export interface VerifyClientInfo {
    origin: string;
    secure: boolean;
    req: IncomingMessage;
  }

  export interface ServerOptions {
    server?: HttpServer | HttpsServer;
    noServer?: boolean;
    verifyClient?: (
      info: VerifyClientInfo,
      done: (
        result: boolean,
        code?: number,
        message?: string,
        headers?: Record<string, string>,
      ) => void,
    ) => void;
  }

  export class WebSocketServer extends EventEmitter {
    constructor(options: ServerOptions);
    readonly clients: Set<WebSocket>;
    close(cb?: (err?: Error) => void): void;
    on(event: "connection", listener: (socket: WebSocket, request: IncomingMessage) => void): this;
    on(event: "headers", listener: (headers: string[], request: IncomingMessage) => void): this;
    on(event: string, listener: (...args: never[]) => void): this;
  }

  export default WebSocket;
}

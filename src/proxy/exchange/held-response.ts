/**
 * A response kept back while a layer decides whether to send the request again (a 401 for the
 * token replay, a 502–504 for a retry): its head and a bounded body. Released, it goes on to the
 * next layer exactly as undici delivered it, so the relay writes it like any other answer.
 */
import type { RawHeaders } from "../../net/raw-headers.js";
import type { AttemptHandler } from "./layer.js";

/** Largest body held while deciding; a bigger response is passed through. */
export const HELD_LIMIT_BYTES = 64 * 1024;

export class HeldResponse {
  private readonly chunks: Buffer[] = [];
  private size = 0;
  /** Set once the held response is complete. */
  trailers: RawHeaders | null = null;

  constructor(
    readonly statusCode: number,
    private readonly rawHeaders: RawHeaders,
    private readonly resume: () => void,
    private readonly statusText: string,
  ) {}

  /** Keeps `chunk`; false once the body outgrew the limit (release it then). */
  add(chunk: Buffer): boolean {
    this.chunks.push(chunk);
    this.size += chunk.length;
    return this.size <= HELD_LIMIT_BYTES;
  }

  /**
   * Hands the response to `next`: head and body so far, and its end when `complete`. Returns
   * false when the upstream must pause until the client drains (undici's contract).
   */
  releaseTo(next: AttemptHandler, complete: boolean): boolean {
    let ok = next.onHeaders(this.statusCode, this.rawHeaders, this.resume, this.statusText);
    for (const chunk of this.chunks) ok = next.onData(chunk) && ok;
    if (complete) next.onComplete(this.trailers);
    return ok;
  }
}

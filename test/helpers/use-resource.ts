/**
 * The lifecycle of everything a test file starts (an emulator, a server, a client): started
 * before the enclosing describe block's tests (or before each test with `{ each: true }`) and
 * stopped after them. The `use…` helpers are built on it.
 */
import { afterAll, afterEach, beforeAll, beforeEach } from "vitest";

/**
 * Start a resource with `start`, stop it with `stop`. Returns a getter for use inside tests; it
 * throws, naming `what`, anywhere else.
 */
export function useResource<T>(
  what: string,
  start: () => T | Promise<T>,
  stop: (resource: T) => unknown,
  lifecycle: { each?: boolean } = {},
): () => T {
  let resource: T | undefined;
  const open = async () => {
    resource = await start();
  };
  const close = async () => {
    const running = resource;
    resource = undefined;
    if (running !== undefined) await stop(running);
  };
  if (lifecycle.each) {
    beforeEach(open);
    afterEach(close);
  } else {
    beforeAll(open);
    afterAll(close);
  }
  return () => {
    if (resource === undefined) throw new Error(`${what} is only available inside tests`);
    return resource;
  };
}

/** listen and close: bind every listener and start the tokens; release everything in order. */
import type { AddressInfo } from "node:net";
import type { AdminListener } from "../admin/admin-listener.js";
import type { ProxyConfig } from "../config/proxy-config.js";
import type { Lifecycle } from "../lifecycle.js";
import { toListenError } from "../net/listen-error.js";
import type { TokenRegistry } from "../token/token-registry.js";
import type { CallerSources } from "./caller-sources.js";
import type { LiveGeneration } from "./generation.js";
import type { InterceptSource } from "./intercept.js";
import type { Reloader } from "./reloader.js";
import type { ProxyServers } from "./servers.js";
import type { TokenSources } from "./token-sources.js";

export interface RunControl {
  listen(): Promise<{ proxy: AddressInfo[]; admin: AddressInfo }>;
  close(timeoutMs?: number): Promise<void>;
}

export function createRunControl(deps: {
  config: ProxyConfig;
  live: LiveGeneration;
  sources: TokenSources;
  callerSources: CallerSources;
  intercept: InterceptSource;
  proxies: ProxyServers;
  admin: AdminListener;
  reloader: Reloader;
  lifecycle: Lifecycle;
}): RunControl {
  const { config, live, sources, callerSources, intercept, proxies, admin, reloader, lifecycle } =
    deps;
  async function listen() {
    try {
      // An unusable users or JWKS file fails the start, before a port is bound.
      await live.generation.callers.ready();
      // An interception CA that cannot sign fails the start the same way.
      await intercept.ready();
      const proxyAddresses: AddressInfo[] = [];
      for (const [index, proxy] of proxies.servers.entries()) {
        const { role, listen: address } = proxies.listeners[index]!;
        const { host, port } = address;
        proxyAddresses.push(
          await proxy.listen().catch((error: unknown) => {
            throw toListenError(error, role, host, port);
          }),
        );
      }
      const { host, port } = config.admin;
      const adminAddress = await admin.listen({ host, port }).catch((error: unknown) => {
        throw toListenError(error, { kind: "admin" }, host, port);
      });
      lifecycle.markRunning();
      live.generation.tokens.startEager();
      setStartCondition(config, live.generation.tokens, lifecycle);
      return { proxy: proxyAddresses, admin: adminAddress };
    } catch (error) {
      // One port taken must not leave the others bound (and the process alive) behind it.
      await close(0).catch(() => {});
      throw error;
    }
  }

  async function close(timeoutMs = live.generation.config.shutdown.timeoutMs): Promise<void> {
    reloader.stop();
    lifecycle.markDraining();
    // Each step runs even if an earlier one failed, so no timer, socket or pool is left open.
    const results = await Promise.allSettled(
      proxies.servers.map((proxy) => proxy.close(timeoutMs)),
    );
    results.push(...(await Promise.allSettled([admin.close(timeoutMs)])));
    live.generation.tokens.close();
    results.push(
      ...(await Promise.allSettled([
        sources.sharedCache?.close(),
        sources.pacers.close(),
        sources.pool.close(),
        callerSources.close(),
      ])),
    );
    lifecycle.markStopped();
    const failed = results.find((r) => r.status === "rejected");
    if (failed) throw failed.reason;
  }

  return { listen, close };
}

/**
 * /startup passes once every prefetched upstream the readiness policy requires has had a token
 * (a Kubernetes startup probe then lets the app container start). Lazy upstreams don't hold
 * startup back, nor does any token under `readiness.requireTokens: none` (a gateway must not
 * stay "starting" forever because one tenant's credential is broken). The condition is asked
 * whenever `started` is read, so a probe sees it the moment it holds; nothing polls it.
 */
function setStartCondition(config: ProxyConfig, tokens: TokenRegistry, lifecycle: Lifecycle): void {
  const waitingFor =
    config.readiness.requireTokens === "none"
      ? []
      : config.upstreams
          .filter((u) => tokens.modeOf(u.name).mode === "prefetch")
          .map((u) => u.name);
  lifecycle.startWhen(() => {
    const statuses = tokens.statuses();
    return waitingFor.every((name) => {
      const state = statuses.get(name)?.state;
      return state === "valid" || state === "degraded";
    });
  });
}

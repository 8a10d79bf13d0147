/** The library surface: build the app from a loaded config. Everything else is internal. */
export { type App, type AppDeps, buildApp } from "./app/build-app.js";
export {
  type ConfigFlags,
  type LoadConfigOptions,
  loadConfig,
  loadConfigWithWarnings,
} from "./config/load.js";
export type { ProxyConfig, UpstreamConfig } from "./config/proxy-config.js";
export type { ConfigFile } from "./config/schema.js";

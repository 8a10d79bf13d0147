/**
 * fastify's `schemaController` option with the default compilers loaded on first use. fastify
 * requires @fastify/ajv-compiler (ajv, ajv's JTD build, ajv-formats) and
 * @fastify/fast-json-stringify-compiler when an instance is created, although only routes with
 * a `schema` ever call them — and the admin routes have none. Loading them only when called
 * keeps 116 modules, 1.3 MiB of heap and ~3 MiB of RSS out of every proxy (bench/PROFILE.md).
 */
import { createRequire } from "node:module";
import type { FastifyServerOptions } from "fastify";

// Resolved from fastify's own location: they are its dependencies, not ours.
const require = createRequire(createRequire(import.meta.url).resolve("fastify"));

type CompilersFactory = NonNullable<
  NonNullable<FastifyServerOptions["schemaController"]>["compilersFactory"]
>;
type Factory = (...args: unknown[]) => unknown;

/** fastify's own default compilers, each required the first time fastify asks for it. */
export const LAZY_SCHEMA_COMPILERS: NonNullable<FastifyServerOptions["schemaController"]> = {
  compilersFactory: {
    buildValidator: ((...args: unknown[]) =>
      (require("@fastify/ajv-compiler") as () => Factory)()(
        ...args,
      )) as CompilersFactory["buildValidator"],
    buildSerializer: ((...args: unknown[]) =>
      (require("@fastify/fast-json-stringify-compiler") as () => Factory)()(
        ...args,
      )) as CompilersFactory["buildSerializer"],
  },
};

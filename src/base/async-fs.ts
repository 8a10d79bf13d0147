/**
 * The promise forms of the `node:fs` calls the sources make, built on its callback API, which
 * every process has loaded already. Not `node:fs/promises`: it comes with seven more built-ins
 * (readline's internals among them, for `FileHandle.readLines`), 5–12 ms of a sidecar's start on
 * the bench machine for a handful of config and secret reads (bench/PROFILE.md, "Built-ins a
 * start loaded for nothing"). test/packaging/bundle-loads-on-use.test.ts checks that a plain
 * start does not load it.
 */
import {
  access as accessCallback,
  mkdir as mkdirCallback,
  readFile as readFileCallback,
  stat as statCallback,
  writeFile as writeFileCallback,
} from "node:fs";
import { promisify } from "node:util";

export const readFile = promisify(readFileCallback);
export const stat = promisify(statCallback);
export const access = promisify(accessCallback);
export const mkdir = promisify(mkdirCallback);
export const writeFile = promisify(writeFileCallback);

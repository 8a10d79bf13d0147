/**
 * Whether a file named by the config can be read, in the words every file field's message uses
 * ("expected a readable file, found nothing at …"): the semantic checks and the interception CA
 * loader (config/intercept-ca.ts) both ask here.
 */
import { constants } from "node:fs";
import { access, stat } from "../base/async-fs.js";

/** Undefined when `file` is a readable regular file, else what is wrong with it. */
export async function checkReadableFile(file: string): Promise<string | undefined> {
  try {
    const info = await stat(file);
    if (info.isDirectory()) return `expected a readable file, found a directory at ${file}`;
    if (!info.isFile()) return `expected a readable file, found something else at ${file}`;
    await access(file, constants.R_OK);
    return undefined;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR")
      return `expected a readable file, found nothing at ${file}`;
    if (code === "EACCES")
      return `expected a readable file, found ${file} but may not read it (permission denied)`;
    return `expected a readable file, found ${file} unreadable (${code ?? String(error)})`;
  }
}

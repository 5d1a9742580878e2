/**
 * kvflash's version, from the package's own package.json (read once): what
 * `kvflash --version` prints and `GET /version` answers (vLLM's route).
 * From dist/src/ the package root is two folders up, in a checkout and in an
 * installed package alike.
 */
import { readFileSync } from "node:fs";

let version: string | null = null;

export function packageVersion(): string {
  version ??= (JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string }).version;
  return version;
}

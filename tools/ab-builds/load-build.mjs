// The library of one built checkout, for the A/B scripts beside this file: its kernels and
// runtime (kvflash/ops) with the synthetic models (kvflash/testing), or, for a build from
// before the main entry was narrowed (no dist/src/ops-entry.js), its old all-in-one entry.
import { existsSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

export async function loadBuild(dir) {
  const at = (p) => pathToFileURL(resolve(dir, p)).href;
  if (!existsSync(resolve(dir, "dist/src/ops-entry.js"))) return import(at("dist/src/index.js"));
  return { ...(await import(at("dist/src/ops-entry.js"))), ...(await import(at("dist/src/testing/index.js"))) };
}

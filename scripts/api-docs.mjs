#!/usr/bin/env node
/**
 * The API reference (docs/api): TypeDoc over the four entry points
 * (typedoc.json: kvflash, kvflash/ops, kvflash/gpu, kvflash/testing), one
 * markdown page each (typedoc-plugin-markdown), generated from the doc
 * comments, as TypeDoc is for the TypeScript libraries it documents. Warnings
 * are errors (a type in a public signature that no entry exports, a broken
 * link in a comment), so the reference stays whole.
 *
 * Usage: node scripts/api-docs.mjs           regenerate docs/api
 *        node scripts/api-docs.mjs --check   regenerate into a temporary folder and exit 1, naming
 *                                            the files, if docs/api differs (CI: .ci/run)
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const DOCS = join(ROOT, "docs", "api");
const check = process.argv.includes("--check");

/** Every file under dir, relative to it, sorted. */
function files(dir) {
  const out = [];
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      if (e.isDirectory()) walk(join(d, e.name));
      else out.push(relative(dir, join(d, e.name)));
    }
  };
  try {
    walk(dir);
  } catch (e) {
    if (e.code !== "ENOENT") throw e;
  }
  return out.sort();
}

const out = check ? mkdtempSync(join(tmpdir(), "kvflash-api-docs-")) : DOCS;
try {
  const typedoc = join(ROOT, "node_modules", "typedoc", "bin", "typedoc");
  const r = spawnSync(process.execPath, [typedoc, "--out", out, "--logLevel", "Warn"], { cwd: ROOT, stdio: "inherit" });
  if (r.status !== 0) {
    console.error("api-docs: TypeDoc failed (warnings are errors: see above)");
    process.exit(1);
  }
  if (check) {
    const want = files(out);
    const have = files(DOCS);
    const differ = [...new Set([...want, ...have])].filter((f) => !want.includes(f) || !have.includes(f) || !readFileSync(join(out, f)).equals(readFileSync(join(DOCS, f))));
    if (differ.length > 0) {
      console.error(`api-docs: docs/api is out of date with the doc comments (${differ.join(", ")}); run \`npm run docs:api\` and commit it`);
      process.exit(1);
    }
    console.log(`api-docs: docs/api is up to date (${want.length} files)`);
  }
} finally {
  if (check) rmSync(out, { recursive: true, force: true });
}

/**
 * Where llama.cpp is, for the GGUF oracle tests (test/model/gguf-oracle.test.ts)
 * and the `gguf` benchmark (bench/suites/gguf.ts). llama.cpp comes from npm as
 * node-llama-cpp and its prebuilt CPU package @node-llama-cpp/linux-x64, at the
 * version pinned here, installed outside package.json by `npm run llamacpp:install`
 * (.ci/llamacpp.sh: `npm install --no-save --ignore-scripts --omit=optional`),
 * so `npm install` for everyone else stays as it was. Not part of the product:
 * src/testing/index.ts does not export it.
 *
 * Linux x64 and arm64 (the CI machines) only. Looked up in $KVFLASH_LLAMACPP_MODULES (a node_modules directory holding
 * both packages, for an install kept outside the repository), else in
 * .ci/cache/llamacpp/node_modules (where .ci/llamacpp.sh installs them), else in the
 * repository's node_modules.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

/** The node-llama-cpp version .ci/llamacpp.sh installs (and the llama.cpp build its binaries are). */
export const LLAMACPP_NPM_VERSION = "3.22.1";
export const LLAMACPP_INSTALL_HINT = "npm run llamacpp:install (installs node-llama-cpp and @node-llama-cpp/linux-x64 without saving them; see CONTRIBUTING.md)";

export interface LlamaCppPackages {
  /** The node_modules directory both packages are in. */
  modules: string;
  /** node-llama-cpp's version. */
  version: string;
  /** file: URL of node-llama-cpp's ESM entry, for import(). */
  bindingEntry: string;
  /** The directory holding libllama.so, libggml*.so and the CPU backends. */
  libDir: string;
  /** The git bundle of the llama.cpp sources the binaries were built from (include/llama.h lives there). */
  sourceBundle: string;
}

const REPO_MODULES = fileURLToPath(new URL("../../../node_modules", import.meta.url));
/** Where .ci/llamacpp.sh installs them: a folder of their own, so the project's node_modules keeps exactly its lock file's packages. */
const ORACLE_MODULES = fileURLToPath(new URL("../../../.ci/cache/llamacpp/node_modules", import.meta.url));

/** The installed packages, or why they cannot be used. */
export function findLlamaCpp(): LlamaCppPackages | { missing: string } {
  const modules = process.env["KVFLASH_LLAMACPP_MODULES"] || (existsSync(join(ORACLE_MODULES, "node-llama-cpp")) ? ORACLE_MODULES : REPO_MODULES);
  const binding = join(modules, "node-llama-cpp");
  if (process.platform !== "linux" || (process.arch !== "x64" && process.arch !== "arm64")) {
    return { missing: `llama.cpp's prebuilt CPU package is wired up for Linux x64 and arm64 only, not ${process.platform}-${process.arch}` };
  }
  const platform = `linux-${process.arch}`;
  const libDir = join(modules, "@node-llama-cpp", platform, "bins", platform);
  if (!existsSync(join(binding, "package.json"))) return { missing: `node-llama-cpp is not installed in ${modules}; ${LLAMACPP_INSTALL_HINT}` };
  if (!existsSync(libDir)) return { missing: `@node-llama-cpp/${platform} (llama.cpp's prebuilt CPU binaries) is not installed in ${modules}; ${LLAMACPP_INSTALL_HINT}` };
  const pkg = JSON.parse(readFileSync(join(binding, "package.json"), "utf8")) as { version: string; exports: Record<string, { import: string }> };
  return {
    modules,
    version: pkg.version,
    bindingEntry: pathToFileURL(join(binding, pkg.exports["."]!.import)).href,
    libDir,
    sourceBundle: join(binding, "llama", "gitRelease.bundle"),
  };
}

/** True when the tests must not skip for want of llama.cpp (CI sets KVFLASH_REQUIRE_LLAMACPP=1). */
export function llamaCppRequired(): boolean {
  return process.env["KVFLASH_REQUIRE_LLAMACPP"] === "1";
}

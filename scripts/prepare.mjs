#!/usr/bin/env node
/**
 * npm's `prepare` step: build what is out of date, and only that, as make
 * does. npm runs `prepare` on `npm install` in the checkout (the first build),
 * before `npm pack`, and — the reason this script exists — when `npx kvflash`
 * runs inside the checkout: npx installs the checkout into its own cache as a
 * link (libnpmexec: a local package whose bin matches the command is
 * "self-executed" through the npx cache) and npm runs a link's `prepare`. An
 * unconditional `npm run build` there cost 1.5–2.5 minutes of silence before
 * the first `npx kvflash …` printed anything.
 *
 * Up to date means, by modification time:
 *   build/kernels.wasm, build/kernels-relaxed.wasm   newer than every file under assembly/ and asconfig.json
 *   dist/<path>.js                                    newer than <path>.ts, for every .ts (not .d.ts) under
 *                                                     tsconfig.json's "include", and than tsconfig.json
 * Whatever is stale is rebuilt with the package's own script (`npm run
 * build:wasm`, `npm run build:ts`); `npm run build` always rebuilds everything.
 *
 * Then the package's bin targets (package.json "bin") are made executable,
 * 0755: tsc writes dist/src/cli/main.js 0644, and npx runs a linked
 * checkout's bin in place, where npm's own chmod at install time (bin-links)
 * came before the file existed, so `npx kvflash` failed with "Permission
 * denied". (tsc keeps an existing file's mode when it writes it again.)
 *
 * Usage: node scripts/prepare.mjs [--check]   (--check: print what is stale, build nothing; exit 1 if anything is)
 */
import { spawnSync } from "node:child_process";
import { chmodSync, existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(fileURLToPath(new URL("..", import.meta.url)));
export const WASM_OUTPUTS = ["build/kernels.wasm", "build/kernels-relaxed.wasm"];

/** Files under `dir` (recursive), as paths relative to `root`; none if `dir` is not there. */
function filesUnder(root, dir) {
  const abs = join(root, dir);
  if (!existsSync(abs)) return [];
  return readdirSync(abs, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => relative(root, join(e.parentPath ?? e.path, e.name)));
}

const mtime = (root, path) => statSync(join(root, path)).mtimeMs;

/**
 * Why each part of the build is out of date, or null where it is not.
 * @param {string} root the package root
 * @returns {{ wasm: string | null, ts: string | null }}
 */
export function staleParts(root = ROOT) {
  return { wasm: staleWasm(root), ts: staleTs(root) };
}

function staleWasm(root) {
  const missing = WASM_OUTPUTS.find((f) => !existsSync(join(root, f)));
  if (missing !== undefined) return `${missing} is missing`;
  const oldest = Math.min(...WASM_OUTPUTS.map((f) => mtime(root, f)));
  const inputs = [...filesUnder(root, "assembly"), "asconfig.json"].filter((f) => existsSync(join(root, f)));
  const newer = inputs.find((f) => mtime(root, f) > oldest);
  return newer === undefined ? null : `${newer.split(sep).join("/")} is newer than the kernels`;
}

function staleTs(root) {
  const tsconfig = JSON.parse(readFileSync(join(root, "tsconfig.json"), "utf8"));
  const outDir = tsconfig.compilerOptions?.outDir ?? "dist";
  const include = tsconfig.include;
  if (!Array.isArray(include)) throw new Error(`tsconfig.json: "include" must list the source folders, got ${JSON.stringify(include)}`);
  const configTime = mtime(root, "tsconfig.json");
  for (const dir of include) {
    for (const source of filesUnder(root, dir)) {
      if (!source.endsWith(".ts") || source.endsWith(".d.ts")) continue;
      const output = join(outDir, `${source.slice(0, -3)}.js`);
      const shown = output.split(sep).join("/");
      if (!existsSync(join(root, output))) return `${shown} is missing`;
      const built = mtime(root, output);
      if (mtime(root, source) > built) return `${source.split(sep).join("/")} is newer than ${shown}`;
      if (configTime > built) return `tsconfig.json is newer than ${shown}`;
    }
  }
  return null;
}

/**
 * The package's bin targets (package.json "bin": one path, or command → path) that exist, made
 * executable (mode 0755; where the file system has no such bits, as on Windows, chmod changes nothing).
 * @param {string} root the package root
 * @returns {string[]} the targets made executable
 */
export function makeBinsExecutable(root = ROOT) {
  const { bin } = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  const targets = typeof bin === "string" ? [bin] : Object.values(bin ?? {});
  const made = [];
  for (const target of targets) {
    if (typeof target !== "string" || !existsSync(join(root, target))) continue;
    chmodSync(join(root, target), 0o755);
    made.push(target);
  }
  return made;
}

/** `npm run <script>` in the package root with the npm that runs us (npm_execpath), output shown. */
function npmRun(script) {
  const npm = process.env["npm_execpath"];
  const [command, args] = npm ? [process.execPath, [npm, "run", script]] : ["npm", ["run", script]];
  const r = spawnSync(command, args, { cwd: ROOT, stdio: "inherit", shell: !npm && process.platform === "win32" });
  if (r.status !== 0) process.exit(r.status ?? 1);
}

if (process.argv[1] !== undefined && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const stale = staleParts();
  const check = process.argv.includes("--check");
  const say = (line) => process.stderr.write(`kvflash prepare: ${line}\n`);
  if (stale.wasm === null && stale.ts === null) {
    say("build/*.wasm and dist/ are up to date, nothing to build (npm run build rebuilds everything)");
  } else {
    if (stale.wasm !== null) say(`${check ? "stale" : "building the kernels"}: ${stale.wasm}`);
    if (stale.ts !== null) say(`${check ? "stale" : "compiling the TypeScript"}: ${stale.ts}`);
    if (check) process.exit(1);
    if (stale.wasm !== null) npmRun("build:wasm");
    if (stale.ts !== null) npmRun("build:ts");
  }
  if (!check) makeBinsExecutable();
}

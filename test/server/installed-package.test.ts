// The package as users get it: `npm pack` of this checkout, installed with
// npm into a temporary directory — with install scripts on, so a build step
// would fail there (the tarball has no sources and no compiler) — and no dev
// dependency comes with it. `npx kvflash` in that directory and `kvflash serve`
// run from that copy; the server serves the chat page and every file the page
// loads (its markdown parser and sanitizer come from the installed
// dependencies). A file missing from the installation gives a 500 that names
// it relative to the package, never by its absolute path. Every file the
// command can load is in the tarball. Offline: the runtime dependencies are
// linked from this checkout's node_modules (file: dependencies, which npm
// links), npm's cache is a fresh temporary directory, and --offline makes any
// fetch an error. Needs `npm` and `npx` on PATH.
import assert from "node:assert/strict";
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, statSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, before, test } from "node:test";
import { waitHealthy } from "./harness.js";

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
const run = promisify(execFile);

interface PackedFile {
  path: string;
}

let tmp: string;
let app: string;
let packed: string[];
/** The runtime dependency closure (npm query .prod): what the installation may hold besides kvflash. */
let runtimeNames: Set<string>;
let server: ChildProcess | null = null;
let url: string;
let stderr = "";

/** npm with none of the npm_* settings of an enclosing `npm test`, its own cache, and no network. */
async function npm(args: string[], cwd: string): Promise<string> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith("npm_")));
  const { stdout } = await run("npm", [...args, "--cache", join(tmp, "npm-cache"), "--offline", "--no-audit", "--no-fund", "--loglevel=error"], { cwd, env, maxBuffer: 64 << 20 });
  return stdout;
}

before(async () => {
  tmp = mkdtempSync(join(tmpdir(), "kvflash-installed-"));
  const [pack] = JSON.parse(await npm(["pack", "--ignore-scripts", "--json", "--pack-destination", tmp], ROOT)) as { filename: string; files: PackedFile[] }[];
  packed = pack!.files.map((f) => f.path);
  // The runtime dependencies (and theirs) as tarballs packed from this checkout's node_modules, the registry's
  // shape: a linked folder would run its own prepare script (dompurify's calls husky) where a tarball runs none.
  const deps = join(tmp, "deps");
  mkdirSync(deps);
  // The production closure, without what other tools put beside it unsaved (.ci/llamacpp.sh's node-llama-cpp and its dependencies).
  const closure = JSON.parse(await npm(["query", ".prod:not(:extraneous)"], ROOT)) as { location: string; path: string }[];
  const runtime = closure.filter((n) => n.location !== "").map((n) => n.path);
  const depPacks = JSON.parse(await npm(["pack", "--ignore-scripts", "--json", "--pack-destination", deps, ...runtime], ROOT)) as { name: string; filename: string }[];
  const tarballs = Object.fromEntries(depPacks.map((d) => [d.name, `file:${join(deps, d.filename)}`]));
  runtimeNames = new Set(depPacks.map((d) => d.name));
  app = join(tmp, "app");
  mkdirSync(app);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "kvflash-install-test", private: true, dependencies: { kvflash: `file:${join(tmp, pack!.filename)}`, ...tarballs } }));
  await npm(["install", "--no-package-lock"], app); // scripts on: a prepare or install step would run (and fail: no sources, no compiler) here

  server = spawn(join(app, "node_modules", ".bin", "kvflash"), ["serve", "--port", "0", "--threads", "1"], { cwd: app, stdio: ["ignore", "ignore", "pipe"] });
  server.stderr!.setEncoding("utf8");
  url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the server did not start in 30 s:\n${stderr}`)), 30_000);
    server!.stderr!.on("data", (chunk: string) => {
      stderr += chunk;
      const m = /listening on (http:\/\/\S+)/.exec(stderr);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    server!.once("exit", (code) => reject(new Error(`the server exited with code ${code}:\n${stderr}`)));
  });
  await waitHealthy(url, () => stderr);
});

after(async () => {
  if (server !== null && server.exitCode === null) {
    const exited = new Promise((resolve) => server!.once("exit", resolve));
    server.kill("SIGTERM");
    const killer = setTimeout(() => server!.kill("SIGKILL"), 15_000);
    await exited;
    clearTimeout(killer);
  }
  rmSync(tmp, { recursive: true, force: true });
});

test("the tarball holds the page and the kernels, and neither benchmarks nor tests", () => {
  for (const file of ["package.json", "dist/src/cli/main.js", "build/kernels.wasm", "models/default/config.json", "src/server/public/index.html", "src/server/public/chat.js"]) {
    assert.ok(packed.includes(file), `${file} is not in the package`);
  }
  assert.deepEqual(packed.filter((f) => /^dist\/(bench|test)\//.test(f)), []);
});

test("the installed kvflash command runs, directly and through npx, and no dev dependency was installed", async () => {
  const { stdout } = await run(join(app, "node_modules", ".bin", "kvflash"), ["--version"]);
  assert.match(stdout, /^kvflash \d+\.\d+\.\d+/);
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith("npm_")));
  const npx = await run("npx", [`--cache=${join(tmp, "npm-cache")}`, "--offline", "kvflash", "--help"], { cwd: app, env });
  assert.match(npx.stdout, /^kvflash — LLM inference on WebAssembly SIMD\n/);
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { devDependencies: Record<string, string> };
  // A devDependency may also be a runtime package's dependency (@webgpu/types, through webgpu): only the dev-only ones must be absent.
  const devOnly = Object.keys(pkg.devDependencies).filter((name) => !runtimeNames.has(name));
  assert.ok(devOnly.includes("typescript") && devOnly.includes("assemblyscript"), devOnly.join(", "));
  const installed = devOnly.filter((name) => existsSync(join(app, "node_modules", name)));
  assert.deepEqual(installed, [], "dev dependencies in the installation");
});

test("every file the kvflash command can load is in the tarball, and every package it imports is a (optional) dependency", () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { bin: Record<string, string>; dependencies: Record<string, string>; optionalDependencies?: Record<string, string> };
  const runtime = { ...pkg.dependencies, ...pkg.optionalDependencies };
  const seen = new Set<string>();
  const packages = new Set<string>();
  const queue = Object.values(pkg.bin).map((b) => join(ROOT, b));
  // import … from "x", import("x"), new URL("x", import.meta.url): the ways src/ reaches a file.
  const REFS = /(?:\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)"([^"]+)"|new URL\("([^"]+)", import\.meta\.url\)/g;
  while (queue.length > 0) {
    const file = queue.pop()!;
    const rel = relative(ROOT, file).split(sep).join("/");
    if (seen.has(rel)) continue;
    seen.add(rel);
    if (!rel.endsWith(".js")) continue;
    for (const m of readFileSync(file, "utf8").matchAll(REFS)) {
      const ref = m[1] ?? m[2]!;
      if (ref.startsWith("node:")) continue;
      if (!ref.startsWith(".")) {
        packages.add(ref.startsWith("@") ? ref.split("/").slice(0, 2).join("/") : ref.split("/")[0]!);
        continue;
      }
      const target = join(dirname(file), ref);
      const targetRel = relative(ROOT, target).split(sep).join("/");
      if (targetRel.startsWith("..") || targetRel.startsWith("node_modules")) continue; // outside the package: the installation's node_modules
      if (existsSync(target) && statSync(target).isDirectory()) {
        assert.ok(packed.some((f) => f.startsWith(`${targetRel.replace(/\/$/, "")}/`)), `${rel} reads the folder ${targetRel}, which is not in the package`);
        continue;
      }
      assert.ok(packed.includes(targetRel), `${rel} loads ${targetRel}, which is not in the package`);
      queue.push(target);
    }
  }
  assert.ok(seen.size > 50, `only ${seen.size} files reached from the bin`);
  assert.deepEqual([...packages].filter((p) => !Object.hasOwn(runtime, p)).sort(), [], "packages the command imports that are not (optional) dependencies");
});

test("a file missing from the installation is a 500 that names it without an absolute path", async () => {
  // Files are read on first request: remove one the server has not served yet, then put it back.
  const installed = join(app, "node_modules", "kvflash", "src", "server", "public", "favicon.svg");
  unlinkSync(installed);
  const res = await fetch(`${url}/favicon.svg`);
  copyFileSync(join(ROOT, "src", "server", "public", "favicon.svg"), installed);
  assert.equal(res.status, 500);
  const text = await res.text();
  const body = JSON.parse(text) as { error: { message: string } };
  assert.match(body.error.message, /src\/server\/public\/favicon\.svg is missing from this kvflash installation/);
  assert.ok(!text.includes(tmp) && !text.includes(realpathSync(tmp)) && !text.includes(ROOT), text);
  assert.equal((await fetch(`${url}/health`)).status, 200, "the server goes on");
});

test("kvflash serve from the installed copy serves the page and everything it loads", async () => {
  const page = await fetch(`${url}/`);
  assert.equal(page.status, 200, stderr);
  assert.equal(page.headers.get("content-type"), "text/html; charset=utf-8");
  const html = await page.text();
  assert.match(html, /<title>kvflash chat<\/title>/);
  // Every local file the page names, and every module its script imports.
  const assets = [...html.matchAll(/(?:src|href)="(\/[^"]*)"/g)].map((m) => m[1]!);
  const script = await (await fetch(`${url}/chat.js`)).text();
  assets.push(...[...script.matchAll(/from "(\/[^"]+)"/g)].map((m) => m[1]!));
  for (const want of ["/chat.js", "/chat.css", "/favicon.svg", "/vendor/marked.esm.js", "/vendor/purify.es.mjs"]) assert.ok(assets.includes(want), `the page does not load ${want}`);
  for (const asset of assets) {
    const res = await fetch(`${url}${asset}`);
    const body = await res.text();
    assert.equal(res.status, 200, `GET ${asset}: ${body}`);
    assert.ok(body.length > 0, asset);
  }
  assert.match(await (await fetch(`${url}/vendor/marked.esm.js`)).text(), /export\s*\{[^}]*\bmarked\b/);
  assert.match(await (await fetch(`${url}/vendor/purify.es.mjs`)).text(), /export \{ purify_default as default \}/);
});

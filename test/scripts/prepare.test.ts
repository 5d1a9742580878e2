// npm's `prepare` (scripts/prepare.mjs) builds only what is stale, and
// `npx kvflash` inside this checkout — which installs the checkout into npx's
// cache as a link and runs its prepare — runs this checkout's CLI without
// rebuilding it. The staleness rules are checked on a made-up package tree,
// the build step with stand-in build scripts (and the bin made executable), and
// npx on this checkout with a fresh npm cache, offline. Needs `npm` and `npx` on PATH.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, statSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";
import { after, before, test } from "node:test";

const ROOT = fileURLToPath(new URL("../../../", import.meta.url));
const PREPARE = join(ROOT, "scripts", "prepare.mjs");
const run = promisify(execFile);

interface Stale {
  wasm: string | null;
  ts: string | null;
}
const { staleParts } = (await import(pathToFileURL(PREPARE).href)) as { staleParts: (root: string) => Stale };

let tmp: string;
before(() => {
  tmp = mkdtempSync(join(tmpdir(), "kvflash-prepare-"));
});
after(() => rmSync(tmp, { recursive: true, force: true }));

/** Writes `files` under `root`, each with modification time `t` (seconds since the epoch). */
function write(root: string, t: number, ...files: string[]): void {
  for (const f of files) {
    mkdirSync(dirname(join(root, f)), { recursive: true });
    writeFileSync(join(root, f), f.endsWith(".json") ? JSON.stringify({ include: ["src", "test"], compilerOptions: { outDir: "dist" } }) : `// ${f}\n`);
    utimesSync(join(root, f), t, t);
  }
}

/** npm without an enclosing `npm test`'s npm_* settings. */
const npmEnv = (): NodeJS.ProcessEnv => Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.toLowerCase().startsWith("npm_")));

test("staleParts: the kernels against assembly/ and asconfig.json, each .js against its .ts and tsconfig.json", () => {
  const root = join(tmp, "tree");
  write(root, 1000, "tsconfig.json", "asconfig.json", "assembly/index.ts", "assembly/ops/rope.ts", "src/a.ts", "src/sub/b.ts", "src/types/x.d.ts", "test/a.test.ts");
  assert.deepEqual(staleParts(root), { wasm: "build/kernels.wasm is missing", ts: "dist/src/a.js is missing" });
  write(root, 2000, "build/kernels.wasm", "build/kernels-relaxed.wasm", "dist/src/a.js", "dist/src/sub/b.js", "dist/test/a.test.js");
  assert.deepEqual(staleParts(root), { wasm: null, ts: null }, "a .d.ts has no output of its own");

  write(root, 3000, "assembly/ops/rope.ts");
  assert.deepEqual(staleParts(root), { wasm: "assembly/ops/rope.ts is newer than the kernels", ts: null });
  write(root, 3000, "build/kernels.wasm", "build/kernels-relaxed.wasm");
  write(root, 3500, "asconfig.json");
  assert.equal(staleParts(root).wasm, "asconfig.json is newer than the kernels");
  write(root, 4000, "build/kernels.wasm", "build/kernels-relaxed.wasm");

  write(root, 5000, "src/sub/b.ts");
  assert.deepEqual(staleParts(root), { wasm: null, ts: "src/sub/b.ts is newer than dist/src/sub/b.js" });
  write(root, 5000, "dist/src/sub/b.js");
  write(root, 6000, "tsconfig.json");
  assert.match(staleParts(root).ts ?? "", /^tsconfig\.json is newer than dist\/src\/a\.js$/);
  write(root, 7000, "dist/src/a.js", "dist/src/sub/b.js", "dist/test/a.test.js");
  write(root, 7000, "src/new.ts");
  assert.equal(staleParts(root).ts, "dist/src/new.js is missing");
});

test("prepare builds only the stale part, with the package's own scripts, and nothing when all is current", async () => {
  const root = join(tmp, "package");
  write(root, 1000, "tsconfig.json", "asconfig.json", "assembly/index.ts", "src/a.ts");
  mkdirSync(join(root, "scripts"));
  copyFileSync(PREPARE, join(root, "scripts", "prepare.mjs"));
  // Stand-in builds: each writes its outputs and notes that it ran.
  const fake = (name: string, outputs: string[]): string =>
    `node -e "const fs=require('fs');for(const f of ${JSON.stringify(outputs).replaceAll('"', "'")}){fs.mkdirSync(require('path').dirname(f),{recursive:true});fs.writeFileSync(f,'')}fs.appendFileSync('ran.log','${name}\\n')"`;
  writeFileSync(
    join(root, "package.json"),
    JSON.stringify({ name: "fake", version: "1.0.0", bin: { fake: "dist/src/a.js" }, scripts: { "build:wasm": fake("wasm", ["build/kernels.wasm", "build/kernels-relaxed.wasm"]), "build:ts": fake("ts", ["dist/src/a.js"]) } }),
  );
  const ran = (): string[] => readFileSync(join(root, "ran.log"), "utf8").trim().split("\n");
  const prepare = async (): Promise<string> => (await run(process.execPath, [join(root, "scripts", "prepare.mjs")], { cwd: root, env: npmEnv() })).stderr;

  assert.match(await prepare(), /building the kernels: build\/kernels\.wasm is missing\n.*compiling the TypeScript: dist\/src\/a\.js is missing/s);
  assert.deepEqual(ran(), ["wasm", "ts"]);
  // The bin target (package.json "bin"), written 0644 by the build as tsc writes it, is made executable.
  const binMode = (): number => statSync(join(root, "dist/src/a.js")).mode & 0o777;
  assert.equal(binMode(), 0o755);
  chmodSync(join(root, "dist/src/a.js"), 0o644);
  assert.match(await prepare(), /build\/\*\.wasm and dist\/ are up to date, nothing to build/);
  assert.deepEqual(ran(), ["wasm", "ts"]);
  assert.equal(binMode(), 0o755, "a current build's bin is made executable too");
  const later = Date.now() / 1000 + 60;
  write(root, later, "src/a.ts");
  await prepare();
  assert.deepEqual(ran(), ["wasm", "ts", "ts"], "only the TypeScript was stale");
  // --check says what is stale and builds nothing, exiting 1.
  write(root, later + 60, "assembly/index.ts");
  const check = await run(process.execPath, [join(root, "scripts", "prepare.mjs"), "--check"], { cwd: root, env: npmEnv() }).then(
    () => ({ code: 0, stderr: "" }),
    (e: { code: number; stderr: string }) => e,
  );
  assert.equal(check.code, 1);
  assert.match(check.stderr, /stale: assembly\/index\.ts is newer than the kernels/);
  assert.deepEqual(ran(), ["wasm", "ts", "ts"]);
});

test("npx kvflash in this checkout runs the checkout's CLI and rebuilds nothing (its prepare finds the build current)", { timeout: 120_000 }, async () => {
  assert.deepEqual(staleParts(ROOT), { wasm: null, ts: null }, "this checkout's build is stale: run npm run build, then this test");
  const outputs = ["build/kernels.wasm", "build/kernels-relaxed.wasm", "dist/src/cli/main.js", "dist/src/server/server.js"];
  const mtimes = (): number[] => outputs.map((f) => statSync(join(ROOT, f)).mtimeMs);
  const before = mtimes();
  const cache = join(tmp, "npm-cache"); // a fresh npm cache: npx must install the checkout into it, as on a first run
  const { stdout } = await run("npx", [`--cache=${cache}`, "--offline", "--yes", "kvflash", "--version"], { cwd: ROOT, env: npmEnv(), timeout: 110_000 });
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string };
  assert.equal(stdout, `kvflash ${pkg.version}\n`);
  assert.deepEqual(mtimes(), before, "npx rebuilt the checkout");
  // The bin npx ran is executable (tsc writes it 0644; prepare makes it 0755).
  assert.equal(statSync(join(ROOT, "dist/src/cli/main.js")).mode & 0o111, 0o111, "dist/src/cli/main.js is not executable");
  // npx ran this checkout, linked into its cache (libnpmexec's self-execution of a local bin).
  const [installDir] = readdirSync(join(cache, "_npx"));
  assert.equal(realpathSync(join(cache, "_npx", installDir!, "node_modules", "kvflash")), realpathSync(ROOT));
});

#!/usr/bin/env node
// Counts, per kernel function, the v128 constants this Node's V8 materializes
// in its optimized code: V8 13 (Node 24) rebuilds a splat constant at every use
// inside a loop (movabs r, imm64; vmovq x, r; vpunpcklqdq x, x, x — three
// instructions a use), where V8 11–12 (Node 20, 22) keep it in a register.
// A kernel whose count is far above Node 20's pays that in its inner loop; the
// cure is to read the mask from memory once per call (memory.data) and pass it
// down (assembly/linalg/kquant-dot.ts MASKS). BENCHMARKS.md "gguf" has the story.
//
//   node tools/v128-const-audit.mjs [relaxed] [top N]        # this Node
//   /path/to/node-24/bin/node tools/v128-const-audit.mjs      # another Node
//
// Builds a copy of the kernels with a name section (asc --debug: same code,
// function names kept) into a temp dir, compiles it eagerly with TurboFan in a
// child process (--no-liftoff --no-wasm-lazy-compilation --print-wasm-code) and
// counts vpunpcklqdq per function.
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const root = fileURLToPath(new URL("..", import.meta.url));
const relaxed = process.argv.includes("relaxed");
const top = Number(process.argv[process.argv.indexOf("top") + 1]) || 20;
const dir = mkdtempSync(join(tmpdir(), "kvflash-audit-"));
try {
  const wasm = join(dir, "kernels.wasm");
  execFileSync(join(root, "node_modules/.bin/asc"), ["assembly/index.ts", "--config", "asconfig.json", "--target", relaxed ? "relaxed" : "release", "--debug", "-o", wasm], { cwd: root, stdio: "inherit" });
  const load = join(dir, "load.mjs");
  writeFileSync(
    load,
    `import { readFileSync } from "node:fs";\nnew WebAssembly.Module(readFileSync(${JSON.stringify(wasm)}));\n`,
  );
  const r = spawnSync(process.execPath, ["--no-liftoff", "--no-wasm-lazy-compilation", "--print-wasm-code", load], { encoding: "utf8", maxBuffer: 1 << 30 });
  if (r.status !== 0) throw new Error(`compiling failed: ${r.stderr}`);
  const counts = new Map();
  let fn = "?";
  for (const line of r.stdout.split("\n")) {
    if (line.startsWith("name: ")) fn = line.slice(6);
    else if (line.includes("vpunpcklqdq")) counts.set(fn, (counts.get(fn) ?? 0) + 1);
  }
  const total = [...counts.values()].reduce((a, b) => a + b, 0);
  console.log(`Node ${process.version} (V8 ${process.versions.v8}), ${relaxed ? "relaxed" : "baseline"} kernels: ${total} v128 constants materialized; top ${top}:`);
  for (const [name, n] of [...counts].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(String(n).padStart(6), name);
} finally {
  rmSync(dir, { recursive: true, force: true });
}

// The library from the three ways people try it in a shell: a module piped to
// `node --input-type=module`, `node -e`, and the REPL. Each asks for 2 threads
// (worker threads, which inherit the parent's Node options) and starts a server
// (the engine and tokenizer workers). `--input-type` used to reach the workers
// and fail them with ERR_INPUT_TYPE_NOT_ALLOWED.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { workerExecArgv } from "../../src/runtime/worker-exec-argv.js";

// The repository root: `import("kvflash")` resolves there by the package's own name (self-reference).
const ROOT = fileURLToPath(new URL("../../../", import.meta.url));

const USE = [
  `const o = await import("kvflash/ops"); const rt = await o.createRuntime({ threads: 2 });`,
  `const x = rt.tensor("f32", [3]).set([1, 2.5, 70000]); const h = rt.tensor("f16", [3]); o.convert(rt, x, h);`,
  `console.log("converted", Array.from(h.toFloat32()).join(","), rt.threads); await rt.dispose();`,
  `const s = await k.serve({ port: 0, threads: 2 }); await s.ready; console.log("served", (await fetch(s.url + "/health")).status); await s.close();`,
];

/** Runs node with `args`; with `repl`, sends each stdin line once the REPL prompts for it (an await in flight holds the prompt back). */
function run(args: string[], stdin: string[] | null, repl = false): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const proc = spawn(process.execPath, args, { cwd: ROOT, stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, NODE_NO_READLINE: "1" } });
    let out = "";
    proc.stdout.setEncoding("utf8").on("data", (c: string) => (out += c));
    proc.stderr.setEncoding("utf8").on("data", (c: string) => (out += c));
    const timer = setTimeout(() => proc.kill("SIGKILL"), 120_000);
    proc.once("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
    if (stdin === null) proc.stdin.end();
    else {
      // The REPL would read the next line while the previous one's await is pending: wait for its prompt.
      void (async () => {
        for (const line of stdin) {
          while (repl && !out.endsWith("> ") && proc.exitCode === null) await new Promise((r) => setTimeout(r, 20));
          const before = out.length;
          proc.stdin.write(`${line}\n`);
          while (repl && out.length === before && proc.exitCode === null) await new Promise((r) => setTimeout(r, 20));
        }
        proc.stdin.end();
      })();
    }
  });
}

function assertWorked(r: { code: number | null; out: string }): void {
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /converted 1,2\.5,Infinity 2/);
  assert.match(r.out, /served 200/);
}

test("workerExecArgv drops the entry point's own options and keeps the rest; with none to drop, workers inherit", () => {
  assert.equal(workerExecArgv(["--stack-trace-limit=10", "--v8-pool-size=4"]), undefined);
  assert.equal(workerExecArgv([]), undefined);
  assert.deepEqual(workerExecArgv(["--input-type=module", "--max-old-space-size=512"]), ["--max-old-space-size=512"]);
  assert.deepEqual(workerExecArgv(["--input-type", "module", "--enable-source-maps"]), ["--enable-source-maps"]);
  assert.deepEqual(workerExecArgv(["-e", "code()", "--no-warnings", "-i"]), ["--no-warnings"]);
  assert.deepEqual(workerExecArgv(["--eval=code()", "--print", "x", "--conditions", "dev"]), ["--conditions", "dev"]);
});

test("without entry-only options workers inherit the parent's as they are: per-process ones (--v8-pool-size) do not fail them", async () => {
  assert.equal(workerExecArgv(["--v8-pool-size=4", "--secure-heap=0", "--enable-source-maps"]), undefined);
  assert.equal(workerExecArgv([]), undefined);
  const file = join(ROOT, "dist", `entry-modes-${process.pid}.mjs`);
  writeFileSync(file, `const k = await import("kvflash");\n${USE.join("\n")}\n`);
  try {
    assertWorked(await run(["--v8-pool-size=4", file], null));
  } finally {
    rmSync(file, { force: true });
  }
});

test("every worker the product starts is given workerExecArgv()", () => {
  const src = join(ROOT, "src");
  const files = readdirSync(src, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".ts"));
  let workers = 0;
  for (const f of files) {
    const text = readFileSync(join(src, f), "utf8");
    for (const m of text.matchAll(/new Worker\(/g)) {
      workers++;
      const call = text.slice(m.index, m.index + 400);
      assert.match(call, /execArgv: workerExecArgv\(\)/, `src/${f}: a Worker without execArgv: workerExecArgv()`);
    }
  }
  assert.ok(workers >= 4, `found ${workers} Worker constructions`);
});

test("node --input-type=module with the script on stdin", async () => {
  assertWorked(await run(["--input-type=module"], [`const k = await import("kvflash");`, ...USE]));
});

test("node -e (CommonJS, dynamic import)", async () => {
  assertWorked(await run(["-e", `import("kvflash").then(async (k) => { ${USE.join(" ")} })`], null));
});

test("node -e --input-type=module", async () => {
  assertWorked(await run(["--input-type=module", "-e", `const k = await import("kvflash"); ${USE.join(" ")}`], null));
});

test("the REPL", async () => {
  assertWorked(await run(["-i"], [`const k = await import("kvflash");`, ...USE, ".exit"], true));
});

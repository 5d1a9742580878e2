// How the relaxed int8 dot lowers (src/runtime/module.ts classifyInt8Dot,
// Int8DotLowering), and the q8 / K-quant kernels' exactness on each lowering
// V8 can be made to take on this CPU. V8's --no-enable-avx-vnni (and
// --no-enable-avx) turn off the instructions it would pick, so a CPU with
// AVX-VNNI also runs the pmaddubsw lowering (saturating int16 pair sums) that
// x64 CPUs without AVX-VNNI get: the conformance suites of
// test/ops/linear-int8-dot.test.ts (every int8-dot mode against the float64
// reference, bit-identical across modes) and test/ops/ggml-linear.test.ts
// (the native K-quant and Q8_0 kernels against llama.cpp's dequantizers) run
// again in a child process under those flags, and must pass there too.
// Without AVX as well (--no-enable-avx), V8 13.6's Liftoff computes the
// i16x8 relaxed dot as b·b; the K-quant int16 pair sums (Runtime.kquantPairs)
// must then stay off, or those suites fail.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { createRuntime, kernelFlavorAvailable } from "../../src/ops-entry.js";
import { INT8_DOT_LOWERINGS, type Int8DotLowering, classifyInt8Dot, defaultInt8Dot, relaxedInt8DotLoweringHere } from "../../src/runtime/module.js";

/** Lane 0 of each lowering's dot of splat(a) and splat(b) (b a byte 0..255) plus acc, written out per byte. */
function model(lowering: Exclude<Int8DotLowering, "unknown">, a: number, b: number, acc: number): number {
  const bv = lowering === "signed" && b >= 128 ? b - 256 : b;
  if (lowering !== "saturating") return acc + a * bv + a * bv + a * bv + a * bv;
  const pair = Math.max(-32768, Math.min(32767, a * bv + a * bv));
  return acc + pair + pair;
}

test("classifyInt8Dot names each lowering by its answers, and anything else (V8 11.3's 2·dot without the accumulator) unknown", () => {
  for (const lowering of ["unsigned", "signed", "saturating"] as const) {
    assert.equal(classifyInt8Dot((a, b, acc) => model(lowering, a, b, acc)), lowering);
  }
  assert.equal(classifyInt8Dot((a, b) => 2 * 4 * a * b), "unknown");
  assert.equal(classifyInt8Dot(() => 0), "unknown");
  assert.deepEqual([...INT8_DOT_LOWERINGS], ["unsigned", "signed", "saturating", "unknown"]);
});

const relaxedHere = kernelFlavorAvailable("relaxed");

test("the probed lowering predicts the relaxed kernel's dot on random operands; a runtime reports it and takes its default mode", { skip: !relaxedHere && "needs Node ≥ 22" }, async () => {
  const lowering = relaxedInt8DotLoweringHere();
  const rt = await createRuntime({ threads: 1, kernels: "relaxed" });
  try {
    assert.equal(rt.int8DotLowering, lowering);
    assert.equal(rt.int8Dot, defaultInt8Dot("relaxed", process.arch, lowering));
    const pairs = rt.exports["int8_dot_pairs_probe"]!;
    const pairsExact = [[-127, 15], [127, 127], [-128, 127], [5, 3]].every(([a, b]) => pairs(a!, b!) === 4 * a! * b!);
    assert.equal(rt.kquantPairs, lowering === "saturating" && pairsExact, "K-quant int16 pair sums only where the dot saturates and the pairs are exact");
    if (lowering === "unknown") return;
    const probe = rt.exports["int8_dot_probe"]!;
    let s = 12345;
    const next = (n: number): number => {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      return s % n;
    };
    for (let i = 0; i < 500; i++) {
      // a in [−128, 127]; b over every byte, half of them ≥ 128, where the lowerings differ.
      const [a, b, acc] = [next(256) - 128, next(256), next(2001) - 1000];
      assert.equal(probe(a, b, acc), model(lowering, a, b, acc), `int8_dot_probe(${a}, ${b}, ${acc}) on the ${lowering} lowering`);
    }
    // Every lowering is exact on b in [0, 127] with a in [−127, 127]: what the i7 mode and the K-quant kernels rely on.
    for (const [a, b] of [[127, 127], [-127, 127], [-127, 0], [64, 100]] as const) assert.equal(probe(a, b, 5), 4 * a * b + 5);
  } finally {
    await rt.dispose();
  }
});

/**
 * The V8 option sets naming the instructions to leave out, each with the lowering it forces. The same
 * two tests are declared on every Node (run-tests.mjs checks that each file reports the same count
 * on Node 20 and 24); where this engine lacks the options (not x64, V8 < 13, no relaxed SIMD) they skip.
 */
const noVnni = ["--no-enable-avx-vnni", "--no-enable-avx-vnni-int8"];
const FORCED: { flags: string[]; lowering: Int8DotLowering; pairs?: boolean }[] = [
  // With AVX the K-quant int16 pair sums are on (and must be covered); without it V8 13.6's Liftoff gets them wrong, so the runtime may leave them off.
  { flags: noVnni, lowering: "saturating", pairs: true },
  { flags: [...noVnni, "--no-enable-avx2", "--no-enable-avx"], lowering: "saturating" },
];

/** Why the forced lowerings cannot run here, or undefined where they can. */
function forcedSkipReason(): string | undefined {
  if (!relaxedHere) return "needs Node ≥ 22";
  if (process.arch !== "x64") return "the V8 options name x64 instructions";
  const options = execFileSync(process.execPath, ["--v8-options"], { encoding: "utf8" });
  if (!/--enable-avx-vnni\b/.test(options) || !/--enable-avx-vnni-int8\b/.test(options)) return "this V8 has no --enable-avx-vnni options";
  return undefined;
}

const forcedSkip = forcedSkipReason();
const here = fileURLToPath(new URL(".", import.meta.url));
const moduleJs = fileURLToPath(new URL("../../src/runtime/module.js", import.meta.url));
const opsJs = fileURLToPath(new URL("../../src/ops-entry.js", import.meta.url));
const suites = ["../ops/linear-int8-dot.test.js", "../ops/ggml-linear.test.js"].map((f) => fileURLToPath(new URL(f, import.meta.url)));

for (const { flags, lowering, pairs } of FORCED) {
  test(`under ${flags.join(" ")}: the relaxed dot lowers ${lowering}, and the q8 and K-quant conformance suites pass on it`, { skip: forcedSkip ?? false }, () => {
    const probe = spawnSync(process.execPath, [...flags, "--input-type=module", "-e", `import { relaxedInt8DotLoweringHere } from ${JSON.stringify(moduleJs)}; import { createRuntime } from ${JSON.stringify(opsJs)}; const rt = await createRuntime({ threads: 1, kernels: "relaxed" }); console.log(relaxedInt8DotLoweringHere(), rt.kquantPairs); await rt.dispose();`], { encoding: "utf8", cwd: here });
    assert.equal(probe.status, 0, probe.stderr);
    const [got, gotPairs] = probe.stdout.trim().split(" ");
    assert.equal(got, lowering);
    if (pairs !== undefined) assert.equal(gotPairs, String(pairs), "the K-quant pair sums are on, so the suites below cover them");
    for (const suite of suites) {
      // Run as a plain script (NODE_TEST_CONTEXT would make it talk to a parent test runner): its reporter prints the counts.
      const { NODE_TEST_CONTEXT: _, ...env } = process.env;
      const run = spawnSync(process.execPath, [...flags, suite], { encoding: "utf8", cwd: here, env: { ...env, KVFLASH_KERNELS: "" } });
      assert.equal(run.status, 0, `${suite} under ${flags.join(" ")}:\n${run.stdout.slice(-4000)}\n${run.stderr.slice(-2000)}`);
      assert.match(run.stdout, /# fail 0|ℹ fail 0/);
      assert.doesNotMatch(run.stdout, /# pass 0\b|ℹ pass 0\b/);
    }
  });
}

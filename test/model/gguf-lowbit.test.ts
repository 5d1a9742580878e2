/**
 * GGUF files of the small-machine quants (Q2_K, Q3_K, IQ4_XS, IQ4_NL) through
 * loadModel, the way `kvflash serve --model file.gguf` loads them. Under
 * --weights auto every matrix stays native (q2_k / q3_k / iq4_xs Weights;
 * IQ4_NL as q8 holding its kvalues_iq4nl codes), the memory plan counts those
 * sizes, and the logits stay within a stated error of the same file decoded
 * to f32 (llama.cpp's dequantized values; the one difference is the
 * activation's Q8_K quantization, as in llama.cpp). --weights q8 | q4 | bf16
 * convert every matrix. A decode step equals the same token in a prefill
 * batch (GEMV and GEMM rows agree). Files come from the test-helper converter
 * (convert.ts, with the reference quantizer quantize.ts); the same files
 * match llama.cpp in gguf-oracle.test.ts.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { type Runtime, type WeightsSetting, createRuntime, loadModel } from "../../src/ops-entry.js";
import { writeTinyModel } from "../../src/testing/index.js";
import { type GgufQuantMix, convertModelDirToGguf } from "../../src/model/gguf/convert.js";
import { ggufWeightSizes, openGgufModel, resolveGgufWeights } from "../../src/model/gguf/gguf-model.js";
import { makeBatch, relErr } from "./decoder-support.js";

let rt: Runtime;
let root: string;
before(async () => {
  rt = await createRuntime({ threads: 2 });
  root = mkdtempSync(join(tmpdir(), "kvflash-gguf-lowbit-"));
});
after(async () => {
  rmSync(root, { recursive: true, force: true });
  await rt.dispose();
});

const SHAPE = { hiddenSize: 256, intermediateSize: 512, numLayers: 2, numHeads: 4, numKvHeads: 2, embeddingStd: 0.5 };
const TOKENS = [3, 17, 42, 5, 99, 7, 130, 12, 64, 1, 8];
const batch = () => makeBatch([{ blocks: [0], start: 0, tokens: TOKENS, logits: "all" }], 16);
const load = (file: string, weights: WeightsSetting) => loadModel(rt, file, { weights, kvDtype: "f32", numBlocks: 4, blockSize: 16, progress: false, maxBatchTokens: 16 });

/**
 * Max relative logit error of the native run against the f32-decoded run.
 * Measured: Q2_K 0.0097, Q3_K 0.0023, IQ4_XS 0.0028, IQ4_NL 0.0078 (activation per 32, the q8 kernels').
 */
const NATIVE_VS_F32 = 0.03;

const CASES: { type: GgufQuantMix; arch: "llama" | "qwen2" | "qwen3"; format: string; bits: [number, number] }[] = [
  { type: "Q2_K", arch: "llama", format: "q2_k", bits: [3.2, 3.3] },
  { type: "Q3_K", arch: "qwen2", format: "q3_k", bits: [3.6, 3.7] },
  { type: "IQ4_XS", arch: "qwen3", format: "iq4_xs", bits: [4.3, 4.4] },
  { type: "IQ4_NL", arch: "llama", format: "q8", bits: [9, 9.1] },
];

for (const c of CASES) {
  test(`${c.type} (${c.arch}) under auto: every matrix ${c.format}, ${c.bits[0]}–${c.bits[1]} bits a weight as planned, logits within ${NATIVE_VS_F32} of the f32 decode; q8, q4 and bf16 convert`, () => {
    const dir = writeTinyModel(join(root, `${c.type}-src`), { arch: c.arch, seed: 21, ...SHAPE }).dir;
    const file = join(root, `${c.type}.gguf`);
    const types = convertModelDirToGguf(dir, file, { type: c.type });
    assert.deepEqual(new Set(types.values()), new Set([c.type, "F32"]));
    const native = load(file, "auto");
    const f32 = load(file, "f32");
    try {
      const w = native.runner.weights;
      const all = [...new Set([w.embedding, w.lmHead, ...w.layers.flatMap((l) => [l.qkv, l.o, l.gateUp, l.down])])]; // a tied head is the embedding
      assert.deepEqual(new Set(all.map((m) => m.format)), new Set([c.format]));
      const g = openGgufModel(file);
      const sizes = ggufWeightSizes(g, resolveGgufWeights("auto", g));
      assert.equal(sizes.embedding + sizes.layers.reduce((a, b) => a + b, 0) + sizes.lmHead, w.bytes);
      const params = all.reduce((n, m) => n + m.rows * m.cols, 0);
      const bits = (8 * w.bytes) / params;
      assert.ok(bits >= c.bits[0] && bits <= c.bits[1], `bits per weight ${bits}`);
      const err = relErr(native.runner.forward(batch()), f32.runner.forward(batch()));
      assert.ok(err <= NATIVE_VS_F32, `native vs f32 decode: ${err}`);
    } finally {
      native.runner.dispose();
      f32.runner.dispose();
    }
    for (const weights of ["q8", "q4", "bf16"] as const) {
      const m = load(file, weights);
      try {
        assert.equal(m.runner.weights.format, weights, `--weights ${weights} converts`);
        assert.equal(m.runner.weights.layers[0]!.down.format, weights);
      } finally {
        m.runner.dispose();
      }
    }
  });
}

test("a Q3_K file of a model whose widths are not multiples of 256 keeps llama.cpp's IQ4_NL fallback (as q8) and Q3_K natively; decode equals prefill", () => {
  // hidden 160: q, k, v, o, gate, up, token_embd and output fall back to IQ4_NL (rows of 160); down (cols 512) stays Q3_K.
  const dir = writeTinyModel(join(root, "odd-src"), { arch: "qwen2", seed: 9, ...SHAPE, hiddenSize: 160 }).dir;
  const file = join(root, "odd.gguf");
  const types = convertModelDirToGguf(dir, file, { type: "Q3_K" });
  assert.deepEqual(new Set(types.values()), new Set(["IQ4_NL", "Q3_K", "F32"]));
  const m = load(file, "auto");
  const f32 = load(file, "f32");
  try {
    const w = m.runner.weights;
    assert.deepEqual([w.layers[0]!.qkv.format, w.layers[0]!.down.format, w.embedding.format], ["q8", "q3_k", "q8"]);
    const all = m.runner.forward(batch());
    const err = relErr(all, f32.runner.forward(batch()));
    assert.ok(err <= NATIVE_VS_F32, `native vs f32 decode: ${err}`);
    m.runner.forward(makeBatch([{ blocks: [1], start: 0, tokens: TOKENS.slice(0, -1), logits: "last" }], 16));
    const step = m.runner.forward(makeBatch([{ blocks: [1], start: TOKENS.length - 1, tokens: TOKENS.slice(-1), logits: "all" }], 16));
    assert.ok(relErr(step, all.subarray(all.length - step.length)) <= 1e-5, `decode vs prefill ${relErr(step, all.subarray(all.length - step.length))}`);
  } finally {
    m.runner.dispose();
    f32.runner.dispose();
  }
});

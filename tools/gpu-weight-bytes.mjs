#!/usr/bin/env node
// GPU memory of a GGUF model's weights in the WebGPU runner, before and
// after the ggml blocks stayed blocks on the GPU (src/gpu/gpu-weights.ts):
// each matrix's type under a mix (default llama-quantize's Q4_K_M; or one
// type for every matrix: Q2_K, Q3_K, IQ4_XS, …) and its fallbacks
// (model/gguf/convert.ts matrixType), then the uploader's bytes for it —
//   before  Q2_K … Q6_K and IQ4_XS decoded to f32 (4 bytes a weight)
//   after   rows of ggml blocks (quant-blocks.ts blockRowBytes)
//   both    Q5_0 / Q8_0 / IQ4_NL fallbacks as q8 codes + f32 scales, F16 / F32
//           as f32, norms and biases f32; every buffer rounded up to 4 bytes
// For the tiny test model it gives what GpuModelRunner.weightBytes reports
// (Q4_K_M: 5 641 216 and 911 744 bytes, measured). Arithmetic only: no model
// is built.
//
//   npx tsc -p tsconfig.json && node tools/gpu-weight-bytes.mjs [Q4_K_M | Q2_K | Q3_K | IQ4_XS | …]
import { matrixType } from "../dist/src/model/gguf/convert.js";
import { blockRowBytes } from "../dist/src/gpu/quant-blocks.js";

const BLOCK = { Q2_K: "q2_k", Q3_K: "q3_k", Q4_K: "q4_k", Q5_K: "q5_k", Q6_K: "q6_k", IQ4_XS: "iq4_xs" };
const MIX = process.argv[2] ?? "Q4_K_M";

function gpuBytes(c, blocksOnGpu) {
  const { h, I, L, H, Hkv, D, V } = c;
  let total = 0;
  const put = (n) => (total += Math.max(4, Math.ceil(n / 4) * 4));
  const mat = (name, rows, cols) => {
    const t = matrixType(name, cols, MIX);
    if (BLOCK[t] && blocksOnGpu) return put(rows * blockRowBytes(BLOCK[t], cols));
    if (t === "Q8_0" || t === "Q5_0" || t === "IQ4_NL") return put(rows * Math.ceil(cols / 32) * 32) + put(rows * Math.ceil(cols / 32) * 4);
    return put(rows * cols * 4);
  };
  mat("token_embd.weight", V, h);
  for (let l = 0; l < L; l++) {
    put(h * 4);
    put(h * 4);
    for (const [n, rows] of [["attn_q", H * D], ["attn_k", Hkv * D], ["attn_v", Hkv * D]]) mat(`blk.${l}.${n}.weight`, rows, h);
    if (c.qkvBias) put((H + 2 * Hkv) * D * 4);
    mat(`blk.${l}.attn_output.weight`, h, H * D);
    mat(`blk.${l}.ffn_gate.weight`, I, h);
    mat(`blk.${l}.ffn_up.weight`, I, h);
    mat(`blk.${l}.ffn_down.weight`, h, I);
  }
  put(h * 4);
  if (!c.tied) mat("output.weight", V, h);
  return total;
}

const SHAPES = {
  "tiny test model (hidden 256, 2 layers)": { h: 256, I: 512, L: 2, H: 4, Hkv: 2, D: 64, V: 448 },
  "Llama-3.1-8B": { h: 4096, I: 14336, L: 32, H: 32, Hkv: 8, D: 128, V: 128256 },
  "Qwen2.5-7B": { h: 3584, I: 18944, L: 28, H: 28, Hkv: 4, D: 128, V: 152064, qkvBias: true },
  "Qwen2.5-0.5B (width 896: Q5_0 / Q8_0 / IQ4_NL fallbacks)": { h: 896, I: 4864, L: 24, H: 14, Hkv: 2, D: 64, V: 151936, qkvBias: true, tied: true },
};
const gib = (n) => (n / 2 ** 30).toFixed(2);
console.log(`| ${MIX} shape | before (K-quants as f32) | after (ggml blocks) | ratio |\n|---|---|---|---|`);
for (const [name, c] of Object.entries(SHAPES)) {
  const [before, after] = [gpuBytes(c, false), gpuBytes(c, true)];
  console.log(`| ${name} | ${before} B (${gib(before)} GiB) | ${after} B (${gib(after)} GiB) | ${(before / after).toFixed(2)}× |`);
}

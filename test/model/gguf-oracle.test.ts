/**
 * llama.cpp as the oracle for GGUF files. On the same file, written by the
 * project's converter (convert.ts: tiny random models, each tokenizer's real
 * vocabulary):
 *   - kvflash's token ids equal llama.cpp's on a corpus of ASCII, Unicode,
 *     whitespace runs, digits, emoji and special-token text, for a
 *     SentencePiece tokenizer (tokenizer.ggml.model "llama") and gpt2 BPE ones
 *     (pre-tokenizers "llama-bpe", "qwen2", "smollm", "default"), on
 *     tokenizer-only files;
 *   - kvflash's last-position logits are within the format's error of
 *     llama.cpp's (F32, Q8_0, Q4_K_M, Q2_K, Q3_K, IQ4_NL, IQ4_XS; the
 *     quantized files by the project's reference quantizer, quantize.ts:
 *     node-llama-cpp has no quantize API), and llama.cpp's top token is kvflash's
 *     top token within that error.
 *
 * llama.cpp is node-llama-cpp's prebuilt CPU build, loaded with
 * getLlama({ gpu: false, build: "never" }); `npm run llamacpp:install` puts it
 * in node_modules without saving it (src/testing/llamacpp.ts says why). Without
 * it these tests skip, saying how to install it; CI installs it and sets
 * KVFLASH_REQUIRE_LLAMACPP=1, which turns the skip into a failure.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { type Runtime, createRuntime, loadModel } from "../../src/ops-entry.js";
import { qwen25HalfBConfig, type TinyModelOptions, writeTinyModel } from "../../src/testing/index.js";
import { readJsonFile } from "../../src/json-file.js";
import { findLlamaCpp, llamaCppRequired } from "../../src/testing/llamacpp.js";
import { type GgufQuantMix, convertModelDirToGguf, ggufArchMetadata } from "../../src/model/gguf/convert.js";
import { GgufMetadata } from "../../src/sources/gguf/metadata.js";
import { readGgufHeader } from "../../src/sources/gguf/reader.js";
import { ggufTokenizer } from "../../src/sources/gguf/tokenizer.js";
import { hfTokenizerToGguf } from "../../src/sources/gguf/tokenizer-to-gguf.js";
import { writeGguf } from "../../src/sources/gguf/writer.js";
import { makeBatch } from "./decoder-support.js";

// The slice of node-llama-cpp's API these tests use (the package is not a typed dependency).
interface LlamaModel {
  tokenize(text: string, specialTokens: boolean): number[];
  createContext(o: { contextSize: number; threads: number; experimentalKvCacheKeyType: string; experimentalKvCacheValueType: string }): Promise<{ getSequence(): LlamaSequence; dispose(): Promise<void> }>;
  dispose(): Promise<void>;
}
interface LlamaSequence {
  controlledEvaluate(input: (number | [number, { generateNext: { logits: boolean } }])[]): Promise<({ next?: { logits?: Map<number, number> | ArrayLike<number> } } | undefined)[]>;
}
interface Llama {
  loadModel(o: { modelPath: string; vocabOnly?: boolean }): Promise<LlamaModel>;
  dispose(): Promise<void>;
}

const found = findLlamaCpp();
let llama: Llama | null = null;
let rt: Runtime;
let root: string;
before(async () => {
  if (!("missing" in found)) {
    const m = (await import(found.bindingEntry)) as { getLlama(o: object): Promise<Llama>; LlamaLogLevel: Record<string, unknown> };
    llama = await m.getLlama({ gpu: false, build: "never", logLevel: m.LlamaLogLevel["error"] });
  }
  rt = await createRuntime({ threads: 2 });
  root = mkdtempSync(join(tmpdir(), "kvflash-gguf-oracle-"));
});
after(async () => {
  await llama?.dispose();
  await rt.dispose();
  rmSync(root, { recursive: true, force: true });
});

const CORPUS = [
  "Hello, world! The quick brown fox jumps over the lazy dog.",
  "a  b   c\t\td\n\ne\r\n  \n   f",
  "    leading spaces, trailing spaces    ",
  "I'm sure they'll say WE'VE done it, don't you?",
  "1234567890 3.14159 2024-11-23 1,000,000 007 x1y22z333",
  "Ünïcödé: café, naïve, Straße, Ελληνικά, русский, 日本語のテキスト, 中文，标点。한국어 עברית العربية",
  "emoji 👋🏽 🇫🇷 👨‍👩‍👧 ✨🚀 ☃",
  "def f(x):\n    return x ** 2  # code",
  "<s>text with </s> special <unk> markers",
  "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
  "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhello<|eot_id|>",
];
const LENML = "node_modules/@lenml";
const SPM = `${LENML}/tokenizer-llama2/models`;

/** A tokenizer-only GGUF (no tensors; llama.cpp loads it vocab-only): Qwen2.5-0.5B's hyperparameters and `dir`'s tokenizer under `pre`. */
function writeVocabGguf(file: string, dir: string, pre: string): void {
  const tokenizerJson = readJsonFile(join(dir, "tokenizer.json")) as Record<string, unknown>;
  const tokenizerConfig = readJsonFile(join(dir, "tokenizer_config.json")) as Record<string, unknown>;
  writeGguf(file, { metadata: { ...ggufArchMetadata(qwen25HalfBConfig()), ...hfTokenizerToGguf(tokenizerJson, tokenizerConfig, { pre }) }, tensors: [] });
}

/** Tokenizers whose ids must equal llama.cpp's on the corpus: SentencePiece (tokenizer.ggml.model "llama") and gpt2 BPE under each pre-tokenizer. */
const TOKENIZERS: { name: string; dir: string; pre: string }[] = [
  { name: "Llama 2 SentencePiece", dir: SPM, pre: "default" },
  { name: "Llama 3 BPE, pre llama-bpe", dir: `${LENML}/tokenizer-llama3/models`, pre: "llama-bpe" },
  { name: "Qwen BPE, pre qwen2", dir: `${LENML}/tokenizer-qwen3/models`, pre: "qwen2" },
  { name: "Qwen BPE, pre smollm", dir: `${LENML}/tokenizer-qwen3/models`, pre: "smollm" },
  { name: "Llama 3 BPE, pre default", dir: `${LENML}/tokenizer-llama3/models`, pre: "default" },
];

/**
 * Max |Δlogit| / max |logit| against llama.cpp. Both run with an f32 KV cache;
 * what remains is the weights' format and how each multiplies by it: F32
 * only float rounding (summation order, exp); for Q8_0 and Q4_K_M llama.cpp
 * also quantizes the activations to Q8_0 / Q8_K (≈ 0.4% of each value's
 * block maximum) before its dot products, which kvflash does not. Seen:
 * F32 3.7e-5, Q8_0 ≤ 2.3e-3, Q4_K_M ≤ 8.3e-3 while kvflash requantizes
 * Q4_K/Q6_K to q8 (its rounding on top of the file's). Native (--weights
 * auto): Q2_K 5.3e-3, Q3_K 1.5e-3, IQ4_NL 1.5e-3 (kept as q8 codes),
 * IQ4_XS 4.7e-3 — stated as Q4_K_M's, 0.02.
 */
const TOLERANCE: Readonly<Partial<Record<GgufQuantMix, number>>> = { F32: 2e-4, Q8_0: 0.01, Q4_K_M: 0.02, Q2_K: 0.02, Q3_K: 0.02, IQ4_NL: 0.02, IQ4_XS: 0.02 };

const TINY = { numLayers: 2, numHeads: 4, numKvHeads: 2, tokenizer: { kind: "copy", dir: SPM } } as const;
/** Tiny random models with the 32 000-token SentencePiece vocabulary; K-quants need rows of 256. */
const CASES: { name: string; type: GgufQuantMix; model: TinyModelOptions; tolerance?: number }[] = [
  { name: "llama F32", type: "F32", model: { arch: "llama", seed: 11, hiddenSize: 128, intermediateSize: 256, tieWordEmbeddings: true, ...TINY } },
  { name: "qwen2 Q8_0", type: "Q8_0", model: { arch: "qwen2", seed: 12, hiddenSize: 128, intermediateSize: 256, ...TINY } },
  { name: "llama Q4_K_M", type: "Q4_K_M", model: { arch: "llama", seed: 13, hiddenSize: 256, intermediateSize: 512, ...TINY } },
  { name: "qwen3 Q4_K_M", type: "Q4_K_M", model: { arch: "qwen3", seed: 14, hiddenSize: 256, intermediateSize: 512, ...TINY } },
  { name: "llama Q2_K", type: "Q2_K", model: { arch: "llama", seed: 15, hiddenSize: 256, intermediateSize: 512, ...TINY } },
  { name: "qwen2 Q3_K", type: "Q3_K", model: { arch: "qwen2", seed: 16, hiddenSize: 256, intermediateSize: 512, ...TINY } },
  { name: "qwen3 IQ4_NL", type: "IQ4_NL", model: { arch: "qwen3", seed: 17, hiddenSize: 128, intermediateSize: 256, ...TINY } },
  { name: "llama IQ4_XS", type: "IQ4_XS", model: { arch: "llama", seed: 18, hiddenSize: 256, intermediateSize: 512, ...TINY } },
  // Gemma: (1 + w) norms stored with the 1 added, sandwich norms, GeGLU, √hidden, softcaps, sliding + global layers, Gemma 3's local/global theta.
  // Gemma 2's embedding std 0.1 keeps its logits (≈ 12) on the final softcap's (10) curve rather than all at ±10.
  // Gemma's F32 bound is 1e-3, not 2e-4: llama.cpp's CPU GELU is a table lookup in f16 (ggml-cpu/vec.h
  // GGML_GELU_FP16: input and output rounded to f16, ≤ 2⁻¹¹ relative each); seen 2.3e-4 (gemma2), 2.7e-5 (gemma3).
  { name: "gemma2 F32", type: "F32", model: { arch: "gemma2", seed: 19, hiddenSize: 128, intermediateSize: 256, slidingWindow: 4, embeddingStd: 0.1, ...TINY }, tolerance: 1e-3 },
  { name: "gemma3 F32", type: "F32", model: { arch: "gemma3", seed: 20, hiddenSize: 128, intermediateSize: 256, slidingWindow: 4, ...TINY }, tolerance: 1e-3 },
  // Phi-3: fused attn_qkv and ffn_up, partial rotary (12 of 16 dims), LongRoPE long factors (context 256 > original 16) and attention factor.
  { name: "phi3 F32", type: "F32", model: { arch: "phi3", seed: 22, hiddenSize: 128, intermediateSize: 256, ...TINY } },
  // SmolLM3: Q/K permuted as llama, RoPE skipped on layer 3 (every 4th).
  { name: "smollm3 F32", type: "F32", model: { arch: "smollm3", seed: 23, hiddenSize: 128, intermediateSize: 256, noRopeLayerInterval: 4, ...TINY, numLayers: 4 } },
  { name: "gemma2 Q8_0", type: "Q8_0", model: { arch: "gemma2", seed: 21, hiddenSize: 128, intermediateSize: 256, slidingWindow: 4, embeddingStd: 0.1, ...TINY } },
];

function needLlamaCpp(t: { skip(message: string): void }): Llama | null {
  if (llama) return llama;
  const why = "missing" in found ? found.missing : "node-llama-cpp did not load";
  if (llamaCppRequired()) assert.fail(`KVFLASH_REQUIRE_LLAMACPP=1, but ${why}`);
  t.skip(why);
  return null;
}

for (const tk of TOKENIZERS) {
  test(`llama.cpp oracle: ${tk.name} — same token ids on the corpus`, async (t) => {
    const cpp = needLlamaCpp(t);
    if (!cpp) return;
    const file = join(root, `vocab-${tk.pre}-${TOKENIZERS.indexOf(tk)}.gguf`);
    writeVocabGguf(file, tk.dir, tk.pre);
    const mine = ggufTokenizer(new GgufMetadata(readGgufHeader(file).metadata, file));
    const lm = await cpp.loadModel({ modelPath: file, vocabOnly: true });
    try {
      for (const text of CORPUS) assert.deepEqual(mine.encode(text, { addSpecialTokens: false }), [...lm.tokenize(text, true)], `ids of ${JSON.stringify(text)}`);
    } finally {
      await lm.dispose();
    }
  });
}

for (const c of CASES) {
  const tolerance = c.tolerance ?? TOLERANCE[c.type]!;
  test(`llama.cpp oracle: ${c.name} — last-position logits within ${tolerance} of llama.cpp's, same top token`, async (t) => {
    const cpp = needLlamaCpp(t);
    if (!cpp) return;
    const file = join(root, `${c.model.arch}-${c.model.seed}-${c.type}.gguf`);
    convertModelDirToGguf(writeTinyModel(join(root, `${c.model.arch}-${c.model.seed}`), c.model).dir, file, { type: c.type });
    const lm = await cpp.loadModel({ modelPath: file });
    const km = loadModel(rt, file, { kvDtype: "f32", numBlocks: 8, blockSize: 16, progress: false });
    try {
      const text = "The capital of France is Paris, and the capital of Italy is";
      const prompt = km.tokenizer.encode(text);
      assert.deepEqual(prompt.slice(1), [...lm.tokenize(text, false)], "prompt ids");
      const ctx = await lm.createContext({ contextSize: 256, threads: 2, experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32" });
      const out = await ctx.getSequence().controlledEvaluate(prompt.map((id, i) => (i === prompt.length - 1 ? [id, { generateNext: { logits: true } }] : id)));
      await ctx.dispose();
      const raw = out[prompt.length - 1]?.next?.logits;
      assert.ok(raw, "llama.cpp returned logits");
      const V = km.config.vocabSize;
      const ref = new Float64Array(V);
      if (raw instanceof Map) for (const [id, v] of raw) ref[id] = v;
      else for (let i = 0; i < V; i++) ref[i] = raw[i]!;
      const mine = km.runner.forward(makeBatch([{ blocks: [0, 1, 2, 3], start: 0, tokens: prompt }], 16));
      let err = 0;
      let scale = 0;
      let argRef = 0;
      let argMine = 0;
      for (let i = 0; i < V; i++) {
        assert.ok(Number.isFinite(mine[i]!), `kvflash logit ${i} is ${mine[i]}`);
        err = Math.max(err, Math.abs(mine[i]! - ref[i]!));
        scale = Math.max(scale, Math.abs(ref[i]!));
        if (ref[i]! > ref[argRef]!) argRef = i;
        if (mine[i]! > mine[argMine]!) argMine = i;
      }
      t.diagnostic(`${km.runner.weights.format} weights: max|Δ| / max|ref| = ${(err / scale).toExponential(2)} (max|ref| ${scale.toFixed(3)}); top token ${argMine} (kvflash), ${argRef} (llama.cpp)`);
      assert.ok(err / scale <= tolerance, `logits: max|Δ| / max|ref| = ${err / scale}, over ${tolerance}`);
      assert.ok(mine[argMine]! - mine[argRef]! <= tolerance * scale, `llama.cpp's top token ${argRef} is ${mine[argMine]! - mine[argRef]!} below kvflash's top ${argMine}`);
    } finally {
      km.runner.dispose();
      await lm.dispose();
    }
  });
}

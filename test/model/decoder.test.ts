// The decoder forward (issue 5 acceptance) on tiny models of every
// architecture: against the float64 reference forward; one prefill equals
// token-by-token decode; a ragged batch equals each sequence alone; chunked
// prefill equals one prefill; Mistral's sliding window is crossed.
//
// Error measure: relErr = max |a − b| / max |b| over a row of logits.
// Bounds: 1e-4 between two f32 forwards (the acceptance bound; measured
// ≈ 1e-6), 2e-4 against the float64 reference (f32 rounding through the layers).
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { type LoadedModel, type Runtime, createRuntime, loadModel } from "../../src/ops-entry.js";
import type { Decoder } from "../../src/model/decoder.js";
import { type ReferenceWeights, referenceForward, TINY_ARCHS, type TinyArch, writeTinyModel } from "../../src/testing/index.js";
import { type TensorToWrite, writeSafetensors } from "../../src/sources/safetensors-writer.js";
import { freeTensors, loadSafetensors } from "../../src/sources/safetensors.js";
import { Blocks, makeBatch, referenceWeights, relErr, row } from "./decoder-support.js";

let rt: Runtime;
let root: string;
const models = new Map<TinyArch, { dir: string; model: LoadedModel; ref: ReferenceWeights }>();
const BLOCK = 4; // small blocks: every test crosses block boundaries

before(async () => {
  rt = await createRuntime({ threads: 2 });
  root = mkdtempSync(join(tmpdir(), "kvflash-decoder-"));
  for (const arch of TINY_ARCHS) {
    // Mistral's window (16) is shorter than the longest prompts below.
    const dir = writeTinyModel(join(root, arch), { arch, seed: 7, numLayers: 2, hiddenSize: 64, intermediateSize: 96 }).dir;
    models.set(arch, { dir, model: loadModel(rt, dir, { weights: "f32", kvDtype: "f32", blockSize: BLOCK, numBlocks: 96, progress: false }), ref: referenceWeights(rt, dir) });
  }
});
after(async () => {
  for (const { model } of models.values()) model.runner.dispose();
  rmSync(root, { recursive: true, force: true });
  await rt.dispose();
});

/** Deterministic prompt of n ids in [3, vocab). */
function prompt(n: number, seed: number, vocab: number): number[] {
  let s = seed;
  return Array.from({ length: n }, () => {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    return 3 + (s % (vocab - 3));
  });
}

for (const arch of TINY_ARCHS) {
  test(`${arch}: prefill logits of every position equal the float64 reference`, () => {
    const { model, ref } = models.get(arch)!;
    const V = model.config.vocabSize;
    const ids = prompt(37, 1, V);
    const blocks = new Blocks(BLOCK);
    const logits = model.runner.forward(makeBatch([{ blocks: blocks.take(ids.length), start: 0, tokens: ids, logits: "all" }], BLOCK));
    assert.equal(logits.length, ids.length * V);
    const want = referenceForward(model.config, ref, ids);
    for (let t = 0; t < ids.length; t++) {
      const e = relErr(row(logits, t, V), row(want, t, V));
      assert.ok(e <= 2e-4, `${arch} position ${t}: relErr ${e.toExponential(2)} > 2e-4`);
    }
  });

  test(`${arch}: one prefill equals token-by-token decode (relErr ≤ 1e-4)`, () => {
    const { model } = models.get(arch)!;
    const V = model.config.vocabSize;
    const ids = prompt(29, 2, V);
    const blocks = new Blocks(BLOCK);
    const a = blocks.take(ids.length);
    const b = blocks.take(ids.length);
    const prefill = model.runner.forward(makeBatch([{ blocks: a, start: 0, tokens: ids, logits: "all" }], BLOCK));
    for (let t = 0; t < ids.length; t++) {
      const step = model.runner.forward(makeBatch([{ blocks: b, start: t, tokens: [ids[t]!] }], BLOCK));
      const e = relErr(step, row(prefill, t, V));
      assert.ok(e <= 1e-4, `${arch} position ${t}: relErr ${e.toExponential(2)}`);
    }
  });

  test(`${arch}: a ragged batch (prefills, a chunk, decodes) equals each sequence run alone`, () => {
    const { model } = models.get(arch)!;
    const V = model.config.vocabSize;
    const blocks = new Blocks(BLOCK);
    const p1 = prompt(23, 3, V);
    const p2 = prompt(5, 4, V);
    const p3 = prompt(31, 5, V);
    const p4 = prompt(12, 6, V);
    // Alone: each sequence in its own steps.
    const alone = (ids: number[], split: number): Float32Array => {
      const bl = blocks.take(ids.length);
      if (split > 0) model.runner.forward(makeBatch([{ blocks: bl, start: 0, tokens: ids.slice(0, split), logits: "none" }], BLOCK));
      return model.runner.forward(makeBatch([{ blocks: bl, start: split, tokens: ids.slice(split), logits: "all" }], BLOCK));
    };
    const want = [alone(p1, 0), alone(p2, 0), alone(p3, 17), alone(p4, 11)];
    // Together: p3 and p4 have their prefixes cached by earlier steps; in the
    // shared step p1 and p2 prefill, p3 continues a chunk, p4 decodes one token.
    const b3 = blocks.take(p3.length);
    const b4 = blocks.take(p4.length);
    model.runner.forward(makeBatch([{ blocks: b3, start: 0, tokens: p3.slice(0, 17), logits: "none" }, { blocks: b4, start: 0, tokens: p4.slice(0, 11), logits: "none" }], BLOCK));
    const got = model.runner.forward(
      makeBatch(
        [
          { blocks: blocks.take(p1.length), start: 0, tokens: p1, logits: "all" },
          { blocks: blocks.take(p2.length), start: 0, tokens: p2, logits: "all" },
          { blocks: b3, start: 17, tokens: p3.slice(17), logits: "all" },
          { blocks: b4, start: 11, tokens: p4.slice(11), logits: "all" },
        ],
        BLOCK,
      ),
    );
    let r = 0;
    want.forEach((w, s) => {
      for (let t = 0; t < w.length / V; t++, r++) {
        const e = relErr(row(got, r, V), row(w, t, V));
        assert.ok(e <= 1e-4, `${arch} sequence ${s} row ${t}: relErr ${e.toExponential(2)}`);
      }
    });
    assert.equal(r * V, got.length);
  });

  test(`${arch}: chunked prefill (chunks of 1, 7, 13 tokens) equals one prefill`, () => {
    const { model } = models.get(arch)!;
    const V = model.config.vocabSize;
    const ids = prompt(40, 8, V);
    const blocks = new Blocks(BLOCK);
    const once = model.runner.forward(makeBatch([{ blocks: blocks.take(ids.length), start: 0, tokens: ids }], BLOCK));
    for (const chunk of [1, 7, 13]) {
      const bl = blocks.take(ids.length);
      let last: Float32Array = new Float32Array(0);
      for (let start = 0; start < ids.length; start += chunk) {
        const end = Math.min(ids.length, start + chunk);
        last = model.runner.forward(makeBatch([{ blocks: bl, start, tokens: ids.slice(start, end), logits: end === ids.length ? "last" : "none" }], BLOCK));
        if (end < ids.length) assert.equal(last.length, 0, "a partial chunk returns no logits");
      }
      const e = relErr(last, once);
      assert.ok(e <= 1e-4, `${arch} chunk ${chunk}: relErr ${e.toExponential(2)}`);
    }
  });
}

test("forward with view: the same logits bit for bit, as a view the next call overwrites; without, a copy that is the caller's", () => {
  const { model } = models.get("llama")!;
  const runner = model.runner as Decoder;
  const V = model.config.vocabSize;
  const ids = prompt(11, 5, V);
  const blocks = new Blocks(BLOCK);
  const [a, b] = [blocks.take(ids.length + 1), blocks.take(ids.length + 1)];
  // The same prompt and next token in two sequences: once copied, once as a view.
  const copy = runner.forward(makeBatch([{ blocks: a, start: 0, tokens: ids, logits: "all" }], BLOCK));
  const view = runner.forward(makeBatch([{ blocks: b, start: 0, tokens: ids, logits: "all" }], BLOCK), { view: true });
  assert.equal(view.length, ids.length * V);
  assert.deepEqual(view, copy);
  const kept = view.slice();
  const next = runner.forward(makeBatch([{ blocks: b, start: ids.length, tokens: [ids[0]!] }], BLOCK), { view: true });
  assert.equal(next.buffer, view.buffer, "the logits of every step live in one buffer");
  assert.equal(next.byteOffset, view.byteOffset);
  assert.notDeepEqual(view.subarray(0, V), kept.subarray(0, V), "the next call overwrote the view");
  const again = runner.forward(makeBatch([{ blocks: a, start: ids.length, tokens: [ids[0]!] }], BLOCK));
  assert.deepEqual(again, next.slice(0, V), "decode after either gives the same logits");
  assert.deepEqual(copy.subarray(0, V), kept.subarray(0, V), "forward's copy is not overwritten by later calls");
});

test("Llama with attention_bias, mlp_bias and llama3 RoPE scaling (every bias, scaled frequencies) matches the reference", () => {
  const { dir, config } = writeTinyModel(join(root, "llama-bias"), {
    arch: "llama",
    seed: 12,
    ropeScaling: { rope_type: "llama3", factor: 8, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 16 },
  });
  // Rewrite the checkpoint with every bias attention_bias and mlp_bias call for, then flip the flags.
  const file = join(dir, "model.safetensors");
  const loaded = loadSafetensors(rt, file);
  const tensors: TensorToWrite[] = [...loaded].map(([name, t]) => ({ name, dtype: "f32", shape: t.shape, data: new Uint8Array(t.toFloat32().buffer) }));
  freeTensors(rt, loaded);
  const { hiddenSize: h, numHeads: H, numKvHeads: Hkv, headDim: D, intermediateSize: I } = config;
  let s = 99;
  const bias = (name: string, n: number): TensorToWrite => {
    const v = Float32Array.from({ length: n }, () => ((s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32 - 0.5) * 0.2);
    return { name, dtype: "f32", shape: [n], data: new Uint8Array(v.buffer) };
  };
  for (let l = 0; l < config.numLayers; l++) {
    const p = `model.layers.${l}`;
    tensors.push(bias(`${p}.self_attn.q_proj.bias`, H * D), bias(`${p}.self_attn.k_proj.bias`, Hkv * D), bias(`${p}.self_attn.v_proj.bias`, Hkv * D), bias(`${p}.self_attn.o_proj.bias`, h));
    tensors.push(bias(`${p}.mlp.gate_proj.bias`, I), bias(`${p}.mlp.up_proj.bias`, I), bias(`${p}.mlp.down_proj.bias`, h));
  }
  writeSafetensors(file, tensors);
  const configPath = join(dir, "config.json");
  writeFileSync(configPath, JSON.stringify({ ...(JSON.parse(readFileSync(configPath, "utf8")) as object), attention_bias: true, mlp_bias: true }));

  const model = loadModel(rt, dir, { weights: "f32", kvDtype: "f32", blockSize: BLOCK, numBlocks: 16, progress: false });
  assert.ok(model.config.qkvBias && model.config.oProjBias && model.config.mlpBias && model.config.ropeScaling.type === "llama3");
  const V = model.config.vocabSize;
  const ids = prompt(40, 13, V); // positions past original_max_position_embeddings
  const got = model.runner.forward(makeBatch([{ blocks: new Blocks(BLOCK).take(ids.length), start: 0, tokens: ids, logits: "all" }], BLOCK));
  const want = referenceForward(model.config, referenceWeights(rt, dir), ids);
  for (let t = 0; t < ids.length; t++) {
    const e = relErr(row(got, t, V), row(want, t, V));
    assert.ok(e <= 2e-4, `position ${t}: relErr ${e.toExponential(2)}`);
  }
  model.runner.dispose();
});

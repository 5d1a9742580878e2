// Phi-3's LongRoPE choice of factors on the tiny phi3 fixture (original
// context 16, partial rotary 12 of 16 dims): a decoder whose maxModelLen stays
// within the original context rotates with the short factors, one allowed
// past it with the long factors (llama.cpp's rule by context size), each
// matching the float64 reference forward that uses the same set (2e-4, the
// decoder tests' bound); and the two sets really differ.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { type Runtime, createRuntime, loadModel } from "../../src/ops-entry.js";
import { referenceForward } from "../../src/testing/index.js";
import { writeTinyModel } from "../../src/testing/index.js";
import { makeBatch, referenceWeights, relErr, row } from "./decoder-support.js";

let rt: Runtime;
let root: string;
before(async () => {
  rt = await createRuntime({ threads: 2 });
  root = mkdtempSync(join(tmpdir(), "kvflash-longrope-"));
});
after(async () => {
  rmSync(root, { recursive: true, force: true });
  await rt.dispose();
});

test("maxModelLen ≤ original_max_position_embeddings: short factors; beyond it: long factors; each equals its reference", () => {
  const dir = writeTinyModel(join(root, "phi3"), { arch: "phi3", seed: 5, numLayers: 2 }).dir;
  const ref = referenceWeights(rt, dir);
  const ids = [5, 77, 130, 9, 300, 41, 12, 250, 66, 18, 3, 199];
  const logitsWith = (maxModelLen: number) => {
    const m = loadModel(rt, dir, { weights: "f32", kvDtype: "f32", maxModelLen, blockSize: 16, numBlocks: 4, progress: false });
    try {
      return { config: m.config, logits: m.runner.forward(makeBatch([{ blocks: [0], start: 0, tokens: ids, logits: "all" }], 16)) };
    } finally {
      m.runner.dispose();
    }
  };
  const short = logitsWith(16);
  const long = logitsWith(64);
  const V = short.config.vocabSize;
  const wantShort = referenceForward(short.config, ref, ids); // T = 12 ≤ 16: transformers' short factors
  const wantLong = referenceForward(short.config, ref, ids, { ropeMaxPositions: 64 });
  let apart = 0;
  for (let t = 0; t < ids.length; t++) {
    assert.ok(relErr(row(short.logits, t, V), row(wantShort, t, V)) <= 2e-4, `short, position ${t}`);
    assert.ok(relErr(row(long.logits, t, V), row(wantLong, t, V)) <= 2e-4, `long, position ${t}`);
    apart = Math.max(apart, relErr(row(short.logits, t, V), row(long.logits, t, V)));
  }
  assert.ok(apart > 1e-2, `the short and long factors must give different logits, got relErr ${apart}`);
});

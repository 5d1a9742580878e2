// Gemma's attention scale is query_pre_attn_scalar^−½, not 1/√head_dim: a
// tiny Gemma 2 with query_pre_attn_scalar = 3 · head_dim matches the float64
// reference (2e-4, the decoder tests' bound) and differs from the same
// weights under the default scale, so a decoder ignoring it fails here.
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
  root = mkdtempSync(join(tmpdir(), "kvflash-gemma-scale-"));
});
after(async () => {
  rmSync(root, { recursive: true, force: true });
  await rt.dispose();
});

test("Gemma 2 with query_pre_attn_scalar ≠ head_dim: the decoder scales scores by its −½ power, as the reference", () => {
  const dir = writeTinyModel(join(root, "gemma2"), { arch: "gemma2", seed: 3, numLayers: 2, queryPreAttnScalar: 48 }).dir;
  const ids = [5, 77, 130, 9, 300, 41, 12, 250, 66, 18, 3, 199, 7, 8, 100, 21, 33, 60, 2, 90];
  const m = loadModel(rt, dir, { weights: "f32", kvDtype: "f32", blockSize: 16, numBlocks: 4, progress: false });
  try {
    assert.equal(m.config.attentionScale, 1 / Math.sqrt(48));
    const V = m.config.vocabSize;
    const got = m.runner.forward(makeBatch([{ blocks: [0, 1], start: 0, tokens: ids, logits: "all" }], 16));
    const ref = referenceWeights(rt, dir);
    const want = referenceForward(m.config, ref, ids);
    const unscaled = referenceForward({ ...m.config, attentionScale: 1 / Math.sqrt(m.config.headDim) }, ref, ids);
    let apart = 0;
    for (let t = 0; t < ids.length; t++) {
      const e = relErr(row(got, t, V), row(want, t, V));
      assert.ok(e <= 2e-4, `position ${t}: relErr ${e.toExponential(2)}`);
      apart = Math.max(apart, relErr(row(unscaled, t, V), row(want, t, V)));
    }
    assert.ok(apart > 1e-3, `query_pre_attn_scalar must change the logits, got relErr ${apart}`);
  } finally {
    m.runner.dispose();
  }
});

// Embedding lookup from a Weight of every format: rows decode exactly as
// dequantizeWeight decodes them; ids are checked; the same Weight serves as
// the tied LM head.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  ArgumentError,
  type Runtime,
  Tensor,
  WEIGHT_FORMATS,
  createRuntime,
  createWeight,
  dequantizeWeight,
  embedding,
  linear,
} from "../../src/ops-entry.js";
import { linearReference } from "../../src/ops/reference/linear.js";
import { assertWithin, randn } from "../helpers/random.js";

describe("embedding", () => {
  let rt: Runtime;
  before(async () => {
    rt = await createRuntime({ threads: 2 });
  });
  after(() => rt.dispose());

  for (const format of WEIGHT_FORMATS) {
    test(`${format}: out[t] = E[ids[t]] decoded, for repeated, first and last ids; ids as Tensor, Int32Array or array`, () => {
      const vocab = 101;
      const hidden = 80;
      const source = rt.tensor("bf16", [vocab, hidden]).set(randn(vocab * hidden, 1));
      const E = createWeight(rt, { source, format });
      const table = dequantizeWeight(rt, { weight: E }).toFloat32();
      const ids = [0, 100, 7, 7, 55, 3, 100];
      const idTensor = rt.tensor("int32", [ids.length]).set(ids);
      for (const given of [ids, Int32Array.from(ids), idTensor]) {
        const out = rt.tensor("f32", [ids.length, hidden]).fill(NaN);
        embedding(rt, { weight: E, ids: given, out });
        const got = out.toFloat32();
        ids.forEach((id, t) => assert.deepEqual(got.subarray(t * hidden, (t + 1) * hidden), table.subarray(id * hidden, (id + 1) * hidden), `token ${t}`));
        rt.free(out);
      }
      E.free();
      rt.free(source);
      rt.free(idTensor);
    });
  }

  test("the tied LM head: linear with the embedding Weight gives logits = h · Eᵀ", () => {
    const vocab = 203;
    const hidden = 64;
    const source = rt.tensor("f32", [vocab, hidden]).set(randn(vocab * hidden, 2));
    for (const format of WEIGHT_FORMATS) {
      const E = createWeight(rt, { source, format });
      const h = rt.tensor("f32", [2, hidden]);
      embedding(rt, { weight: E, ids: [5, 9], out: h });
      const logits = rt.tensor("f32", [2, vocab]).fill(NaN);
      linear(rt, { x: h, weight: E, out: logits });
      const e = dequantizeWeight(rt, { weight: E });
      const want = linearReference(h.toFloat32(), e.toFloat32(), { tokens: 2, rows: vocab, cols: hidden });
      // Loose: q8/q4 also quantize h; the tight bound is linear.test.ts's business.
      const tol = format === "q4" ? 0.5 : format === "q8" ? 0.1 : 1e-3;
      assertWithin(logits.toFloat32(), want, () => tol, format);
      // A token's own row scores highest against itself (|E_i|² dominates at this size).
      const got = logits.toFloat32();
      const argmax = (o: number) => got.subarray(o, o + vocab).reduce((b, v, i, a) => (v > a[b]! ? i : b), 0);
      assert.equal(argmax(0), 5, format);
      assert.equal(argmax(vocab), 9, format);
      for (const t of [h, logits, e]) rt.free(t);
      E.free();
    }
    rt.free(source);
  });

  test("out may be a row-strided view; bad ids and shapes are refused by name", () => {
    const source = rt.tensor("f32", [10, 8]).set(randn(80, 3));
    const E = createWeight(rt, { source, format: "q8" });
    const wide = rt.tensor("f32", [3, 16]).fill(NaN);
    const view = new Tensor(rt.memory, wide.ptr + 32, "f32", [3, 8], [16, 1]);
    embedding(rt, { weight: E, ids: [1, 2, 3], out: view });
    const w = wide.toFloat32();
    for (let t = 0; t < 3; t++) for (let i = 0; i < 8; i++) assert.ok(Number.isNaN(w[t * 16 + i]!) && !Number.isNaN(w[t * 16 + 8 + i]!));
    const out = rt.tensor("f32", [2, 8]);
    const check = (fn: () => unknown, argument: string, text: RegExp) =>
      assert.throws(fn, (e: unknown) => e instanceof ArgumentError && e.argument === argument && text.test(e.message));
    check(() => embedding(rt, { weight: E, ids: [1, 10], out }), "ids[1]", /\[0, 10\), got 10/);
    check(() => embedding(rt, { weight: E, ids: [-1, 0], out }), "ids[0]", /got -1/);
    check(() => embedding(rt, { weight: E, ids: [1.5, 0], out }), "ids[0]", /got 1.5/);
    check(() => embedding(rt, { weight: E, ids: [1], out }), "ids", /must have 2 entries/);
    check(() => embedding(rt, { weight: E, ids: [1, 2], out: rt.tensor("f32", [2, 9]) }), "out.shape[1]", /must be 8/);
    check(() => embedding(rt, { weight: E, ids: rt.tensor("f32", [2]), out }), "ids.dtype", /int32/);
    E.free();
  });
});

// The ops composed as a decoder forward calls them: a Llama/Qwen MLP block
//   h = x + down(silu(gate(n)) ⊙ up(n)),  n = rmsNorm(x)
// with a fused gate_up Weight, column views for gate and up, and the fused
// add + norm for the next layer — against the same block in float64 on the
// dequantized weights.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  type Runtime,
  Tensor,
  WEIGHT_FORMATS,
  add,
  addRmsNorm,
  createRuntime,
  createWeight,
  dequantizeWeight,
  linear,
  rmsNorm,
  swiglu,
} from "../../src/ops-entry.js";
import { linearReference } from "../../src/ops/reference/linear.js";
import { rmsNormReference } from "../../src/ops/reference/rmsnorm.js";
import { swigluReference } from "../../src/ops/reference/swiglu.js";
import { randn, relRms } from "../helpers/random.js";

describe("ops composed: an MLP block", () => {
  let rt: Runtime;
  before(async () => {
    rt = await createRuntime({ threads: 2 });
  });
  after(() => rt.dispose());

  for (const format of WEIGHT_FORMATS) {
    test(`${format}: x + down(swiglu(gate_up(rmsNorm(x)))) then the next norm, T = 3, hidden 96, intermediate 160`, (t) => {
      const T = 3;
      const H = 96;
      const I = 160;
      const eps = 1e-6;
      const gateSrc = rt.tensor("bf16", [I, H]).set(randn(I * H, 1, 0.1));
      const upSrc = rt.tensor("bf16", [I, H]).set(randn(I * H, 2, 0.1));
      const downSrc = rt.tensor("bf16", [H, I]).set(randn(H * I, 3, 0.1));
      const wGateUp = createWeight(rt, { source: [gateSrc, upSrc], format });
      const wDown = createWeight(rt, { source: downSrc, format });
      const norm1 = rt.tensor("bf16", [H]).set(randn(H, 4, 0.2).map((v) => 1 + v));
      const norm2 = rt.tensor("f32", [H]).set(randn(H, 5, 0.2).map((v) => 1 + v));
      const x0 = randn(T * H, 6);

      const x = rt.tensor("f32", [T, H]).set(x0);
      const n = rt.tensor("f32", [T, H]).fill(NaN);
      const gateUp = rt.tensor("f32", [T, 2 * I]).fill(NaN);
      const gate = new Tensor(rt.memory, gateUp.ptr, "f32", [T, I], [2 * I, 1]);
      const up = new Tensor(rt.memory, gateUp.ptr + I * 4, "f32", [T, I], [2 * I, 1]);
      const o = rt.tensor("f32", [T, H]).fill(NaN);
      rmsNorm(rt, { x, weight: norm1, out: n, eps });
      linear(rt, { x: n, weight: wGateUp, out: gateUp });
      swiglu(rt, { gate, up, out: gate });
      linear(rt, { x: gate, weight: wDown, out: o });
      add(rt, { a: x, b: o, out: x });
      const h = x.toFloat32();
      const n2 = rt.tensor("f32", [T, H]).fill(NaN);
      x.set(x0);
      // The fused path: x += o, n2 = norm2(x).
      addRmsNorm(rt, { x, delta: o, weight: norm2, out: n2, eps });
      assert.deepEqual(x.toFloat32(), h, "addRmsNorm's residual equals add's");

      // float64 reference on the dequantized weights.
      const gu = dequantizeWeight(rt, { weight: wGateUp }).toFloat32();
      const dw = dequantizeWeight(rt, { weight: wDown }).toFloat32();
      const rn = rmsNormReference(x0, norm1.toFloat32(), T, H, eps);
      const rgu = linearReference(rn, gu, { tokens: T, rows: 2 * I, cols: H });
      const g = new Float64Array(T * I);
      const u = new Float64Array(T * I);
      for (let i = 0; i < T; i++) {
        g.set(rgu.subarray(i * 2 * I, i * 2 * I + I), i * I);
        u.set(rgu.subarray(i * 2 * I + I, (i + 1) * 2 * I), i * I);
      }
      const act = swigluReference(g, u);
      const ro = linearReference(act, dw, { tokens: T, rows: H, cols: I });
      const rh = x0.map((v, i) => v + ro[i]!);
      const rn2 = rmsNormReference(rh, norm2.toFloat32(), T, H, eps);
      // q8/q4 also quantize the activations entering each linear.
      const bound = { f32: 1e-5, bf16: 1e-5, q8: 0.02, q4: 0.1 }[format];
      const e1 = relRms(Float32Array.from(h, (v, i) => v - x0[i]!), Float64Array.from(rh, (v, i) => v - x0[i]!));
      const e2 = relRms(n2.toFloat32(), rn2);
      t.diagnostic(`${format}: MLP output rel. RMS error ${e1.toExponential(2)}, next norm ${e2.toExponential(2)}`);
      assert.ok(e1 <= bound && e2 <= bound, `${format}: errors ${e1}, ${e2} > ${bound}`);
      for (const tt of [gateSrc, upSrc, downSrc, norm1, norm2, x, n, gateUp, o, n2]) rt.free(tt);
      wGateUp.free();
      wDown.free();
    });
  }
});

import { test } from "node:test";
import { createRuntime, referenceFlashAttention } from "../../src/index.js";
import { gpuFlashAttention } from "../../src/gpu/index.js";
import { randomTensor, rng } from "../attention/support.js";
import { assertGpuClose, openTestGpu } from "./support.js";

test("smoke", async () => {
  const g = await openTestGpu();
  if (!g.gpu) return;
  console.log(g.gpu.describe());
  const rt = await createRuntime({ threads: 1 });
  const r = rng(1);
  const D = 80;
  const q = randomTensor(rt, "f32", [2, 4, 7, D], r);
  const k = randomTensor(rt, "f16", [2, 2, 9, D], r);
  const v = randomTensor(rt, "f16", [2, 2, 9, D], r);
  const o = { q, k, v, causal: true, returnLse: true };
  const t0 = Date.now();
  const res = await gpuFlashAttention(g.gpu, rt, o);
  console.log("ms", Date.now() - t0);
  for (let i = 0; i < 2; i++) { const t1 = Date.now(); await gpuFlashAttention(g.gpu, rt, o); console.log("again ms", Date.now() - t1); }
  const q2 = randomTensor(rt, "f32", [1, 4, 1000, D], r);
  const k2 = randomTensor(rt, "f16", [1, 2, 1000, D], r);
  const o2 = { q: q2, k: k2, v: k2, causal: true, returnLse: true };
  let t2 = Date.now(); const res2 = await gpuFlashAttention(g.gpu, rt, o2); console.log("1000 ms", Date.now() - t2);
  t2 = Date.now(); const ref2 = referenceFlashAttention(o2); console.log("ref ms", Date.now() - t2);
  assertGpuClose("1000", { out: res2.out.toFloat32(), lse: res2.lse!.toFloat32() }, ref2, D);
  assertGpuClose("smoke", { out: res.out.toFloat32(), lse: res.lse!.toFloat32() }, referenceFlashAttention(o), D);
  g.gpu.destroy();
  await rt.dispose();
});

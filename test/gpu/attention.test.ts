// Conformance of the WGSL attention kernels (src/gpu/wgsl/) against the
// float64 references, through the GPU operators (src/gpu/attention.ts) that
// share the CPU operators' check and plan. Random inputs; awkward head dims
// (D = 80, 64, 128), lengths 1, 7, 97 and 1000; GQA; out and lse poisoned
// with NaN first, so an unwritten element fails. Tolerances: support.ts.
// Sizes are kept small: on SwiftShader (a CPU) the 1000-key cases are decode
// rows or few query rows, and every case shares one compiled pipeline per
// kernel (a compile costs seconds there).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  ArgumentError,
  AttentionPlan,
  type AttentionResult,
  type Runtime,
  type Tensor,
  createRuntime,
  referenceFlashAttention,
  referenceIncreFlashAttention,
  referencePagedAttention,
} from "../../src/ops-entry.js";
import { GPU_PLAN_SLOTS, GpuDevice, GpuError, gpuFlashAttention, gpuIncreFlashAttention, gpuPagedAttention } from "../../src/gpu/index.js";
import { freeAll, host, hostCache, lseShapeOf, materialize, randomTensor, rng, tensorOf, uniform } from "../attention/support.js";
import { pagedFixture } from "../kv/paged-support.js";
import { assertGpuClose, openTestGpu } from "./support.js";

const opened = await openTestGpu();

/** Runs `call` with out and lse poisoned (NaN) and returns what it wrote. */
async function poisoned(rt: Runtime, q: Tensor, layout: string | undefined, call: (out: Tensor, lse: Tensor) => Promise<AttentionResult>): Promise<{ out: Float32Array; lse: Float32Array }> {
  const out = rt.tensor("f32", q.shape).fill(NaN);
  const lse = rt.tensor("f32", lseShapeOf(layout, q)).fill(NaN);
  try {
    const r = await call(out, lse);
    assert.equal(r.out, out, "the preallocated out is the result");
    assert.equal(r.lse, lse, "the preallocated lse is the result");
    return { out: out.toFloat32(), lse: lse.toFloat32() };
  } finally {
    rt.free(out);
    rt.free(lse);
  }
}

/** A test that skips, with the reason, where no adapter opened (and KVFLASH_REQUIRE_WEBGPU is unset). */
const gpuTest = (name: string, fn: () => Promise<void>) => test(name, { skip: opened.skip }, fn);

describe("WebGPU attention kernels against the float64 references", () => {
  let rt: Runtime;
  let gpu: GpuDevice;
  before(async () => {
    rt = await createRuntime({ threads: 1 });
    if (opened.gpu) gpu = opened.gpu;
  });
  after(async () => {
    opened.gpu?.destroy();
    await rt.dispose();
  });

  gpuTest("prefill FlashAttention-2: GQA, causal, D = 80, Sq = Sk = 97, f32 K/V (BNSD)", async () => {
    const random = rng(1);
    const D = 80;
    const o = {
      q: randomTensor(rt, "f32", [2, 4, 97, D], random),
      k: randomTensor(rt, "f32", [2, 2, 97, D], random),
      v: randomTensor(rt, "f32", [2, 2, 97, D], random),
      causal: true,
    };
    const got = await poisoned(rt, o.q, "BNSD", (out, lse) => gpuFlashAttention(gpu, rt, { ...o, out, lse }));
    assertGpuClose("causal GQA", got, referenceFlashAttention(o), D);
    freeAll(rt, o);
  });

  gpuTest("prefill: f16 K/V, 7 queries over 1000 keys, window, softcap and ALiBi (BSND, D = 80)", async () => {
    const random = rng(2);
    const D = 80;
    const o = {
      q: randomTensor(rt, "f32", [1, 7, 2, D], random, -3, 3),
      k: randomTensor(rt, "f16", [1, 1000, 1, D], random, -3, 3),
      v: randomTensor(rt, "f16", [1, 1000, 1, D], random),
      layout: "BSND" as const,
      causal: true,
      window: [300, 0] as const,
      softcap: 2.5,
      alibiSlopes: tensorOf(rt, "f32", [2], [0.01, 0.003]),
    };
    const got = await poisoned(rt, o.q, "BSND", (out, lse) => gpuFlashAttention(gpu, rt, { ...o, out, lse }));
    assertGpuClose("window softcap alibi", got, referenceFlashAttention(o), D);
    freeAll(rt, o);
  });

  gpuTest("prefill: ragged TND batch (1 query over 7 keys, 7 over 97) with a broadcast bias and a random mask, D = 64, bf16", async () => {
    const random = rng(3);
    const D = 64;
    const H = 3;
    const maskValues = Float32Array.from({ length: 2 * 7 * 97 }, () => (random() < 0.25 ? 1 : 0));
    // Row 0 of sequence 1 keeps no key: o = 0, lse = −∞.
    for (let j = 0; j < 97; j++) maskValues[7 * 97 + j] = 1;
    const o = {
      q: randomTensor(rt, "f32", [8, H, D], random),
      k: randomTensor(rt, "bf16", [104, 1, D], random),
      v: randomTensor(rt, "bf16", [104, 1, D], random),
      layout: "TND" as const,
      cuSeqlensQ: [0, 1, 8],
      cuSeqlensK: [0, 7, 104],
      bias: tensorOf(rt, "f32", [H, 1, 97], uniform(H * 97, random)),
      mask: tensorOf(rt, "uint8", [2, 1, 7, 97], maskValues),
      scale: 0.2,
    };
    const got = await poisoned(rt, o.q, "TND", (out, lse) => gpuFlashAttention(gpu, rt, { ...o, out, lse }));
    const ref = referenceFlashAttention(o);
    assert.equal(ref.lse[1 * H], -Infinity, "the fixture has a row with no kept key");
    assertGpuClose("ragged bias mask", got, ref, D);
    freeAll(rt, o);
  });

  gpuTest("prefill over several 64-row and key tiles: D = 48 (a partial head-dim slab), 130 queries × G = 2 over 130 keys, full and then causal with a 20-key window (tiles skipped on both sides)", async () => {
    const random = rng(6);
    const D = 48;
    const base = {
      q: randomTensor(rt, "f32", [1, 2, 130, D], random),
      k: randomTensor(rt, "f16", [1, 1, 130, D], random),
      v: randomTensor(rt, "f16", [1, 1, 130, D], random),
    };
    for (const [name, extra] of [["full", { causal: false }], ["causal window", { causal: true, window: [20, 0] as const }]] as const) {
      const o = { ...base, ...extra };
      const got = await poisoned(rt, o.q, "BNSD", (out, lse) => gpuFlashAttention(gpu, rt, { ...o, out, lse }));
      assertGpuClose(`tiles ${name}`, got, referenceFlashAttention(o), D);
    }
    freeAll(rt, base);
  });

  gpuTest("prefill at D = 256 (Gemma's head dim: four 64-dim V slabs), causal, 33 queries × G = 2 over 33 keys", async () => {
    const random = rng(7);
    const D = 256;
    const o = {
      q: randomTensor(rt, "f32", [1, 2, 33, D], random),
      k: randomTensor(rt, "f32", [1, 1, 33, D], random),
      v: randomTensor(rt, "f32", [1, 1, 33, D], random),
      causal: true,
    };
    const got = await poisoned(rt, o.q, "BNSD", (out, lse) => gpuFlashAttention(gpu, rt, { ...o, out, lse }));
    assertGpuClose("D = 256", got, referenceFlashAttention(o), D);
    freeAll(rt, o);
  });

  gpuTest("prefill: causal with Sq > Sk leaves the first rows empty (o = 0, lse = −∞), D = 128", async () => {
    const random = rng(4);
    const D = 128;
    const o = {
      q: randomTensor(rt, "f32", [1, 2, 7, D], random),
      k: randomTensor(rt, "f32", [1, 2, 3, D], random),
      v: randomTensor(rt, "f32", [1, 2, 3, D], random),
      causal: true,
    };
    const got = await poisoned(rt, o.q, "BNSD", (out, lse) => gpuFlashAttention(gpu, rt, { ...o, out, lse }));
    assert.equal(got.lse[0], -Infinity);
    assertGpuClose("empty rows", got, referenceFlashAttention(o), D);
    freeAll(rt, o);
  });

  gpuTest("decode IncreFlashAttention: lengths 1, 97, 1000 with FlashDecoding split-KV and the LSE merge, f16 cache, G = 4, D = 80, with and without subgroups", async () => {
    const random = rng(5);
    const D = 80;
    const lengths = [1, 97, 1000];
    const spec = {
      q: host("f32", [3, 8, 1, D], Float32Array.from(uniform(3 * 8 * D, random))),
      k: hostCache("f16", "BNSD", 3, 2, 1000, D, lengths, random),
      v: hostCache("f16", "BNSD", 3, 2, 1000, D, lengths, random),
    };
    const o = { ...materialize(rt, spec), actualSeqLengths: lengths };
    const ref = referenceIncreFlashAttention(o);
    const gpuPlan = AttentionPlan.create(rt, { actualSeqLengths: lengths, numHeads: 8, numKvHeads: 2, headDim: D, threads: GPU_PLAN_SLOTS });
    assert.ok(gpuPlan.split, `a plan for GPU_PLAN_SLOTS splits the 1000 keys (${gpuPlan.reason})`);
    gpuPlan.dispose();
    const plain = (await GpuDevice.open({ device: "webgpu", disable: ["subgroups"] }))!;
    try {
      assert.equal(plain.features.has("subgroups"), false);
      for (const [name, device] of [["adapter features", gpu], ["no subgroups", plain]] as const) {
        // undefined: the plan the operator builds for the GPU (GPU_PLAN_SLOTS splits the 1000 keys).
        for (const splitKv of [undefined, 1, 4]) {
          const got = await poisoned(rt, o.q, "BNSD", (out, lse) => gpuIncreFlashAttention(device, rt, { ...o, ...(splitKv === undefined ? {} : { splitKv }), out, lse }));
          assertGpuClose(`${name}, splitKv=${splitKv}`, got, ref, D);
        }
      }
    } finally {
      plain.destroy();
    }
    freeAll(rt, o);
  });

  gpuTest("decode kernel with every score option: 2 queries × G = 4, window, softcap, ALiBi, bias, mask (BSND, bf16, D = 64)", async () => {
    const random = rng(10);
    const D = 64;
    const lengths = [97, 7];
    const maskValues = Float32Array.from({ length: 2 * 2 * 97 }, () => (random() < 0.2 ? 1 : 0));
    const spec = {
      q: host("f32", [2, 2, 8, D], Float32Array.from(uniform(2 * 2 * 8 * D, random))),
      k: hostCache("bf16", "BSND", 2, 2, 97, D, lengths, random),
      v: hostCache("bf16", "BSND", 2, 2, 97, D, lengths, random),
    };
    const o = {
      ...materialize(rt, spec),
      layout: "BSND" as const,
      actualSeqLengths: lengths,
      window: [40, -1] as const,
      softcap: 3,
      alibiSlopes: tensorOf(rt, "f32", [2, 8], uniform(16, random, 0, 0.05)),
      bias: tensorOf(rt, "f32", [8, 1, 97], uniform(8 * 97, random)),
      mask: tensorOf(rt, "uint8", [2, 1, 2, 97], maskValues),
    };
    const ref = referenceIncreFlashAttention(o);
    for (const splitKv of [1, 3]) {
      const got = await poisoned(rt, o.q, "BSND", (out, lse) => gpuIncreFlashAttention(gpu, rt, { ...o, splitKv, out, lse }));
      assertGpuClose(`splitKv=${splitKv}`, got, ref, D);
    }
    freeAll(rt, o);
  });

  gpuTest("paged decode and chunked prefill over block tables (f32 and f16 caches, block size 16, split-KV)", async () => {
    for (const dtype of ["f32", "f16"] as const) {
      const random = rng(dtype === "f32" ? 6 : 7);
      const D = 64;
      const f = pagedFixture(rt, { dtype, lengths: [7, 97, 1000], blockSize: 16, numKvHeads: 2, headDim: D, random });
      // A mixed step (decode, a 7-token prefill chunk: FlashAttention-2) and a decode-only step (the decode kernel).
      for (const cuSeqlensQ of [[0, 1, 8, 9], [0, 1, 2, 3]]) {
        const T = cuSeqlensQ[3]!;
        const q = randomTensor(rt, "f32", [T, 4, D], random);
        const o = { q, cache: f.cache, layer: 0, cuSeqlensQ, seqLens: f.lengths, blockTable: f.blockTable, maxBlocksPerSeq: f.maxBlocksPerSeq, causal: true };
        const ref = referencePagedAttention(o);
        for (const splitKv of [1, 3]) {
          const got = await poisoned(rt, q, "TND", (out, lse) => gpuPagedAttention(gpu, rt, { ...o, splitKv, out, lse }));
          assertGpuClose(`${dtype} paged T=${T} splitKv=${splitKv}`, got, ref, D);
        }
        rt.free(q);
      }
      f.cache.dispose();
    }
  });

  gpuTest("one operator API: a bad argument is the CPU operator's ArgumentError, thrown before any GPU work", async () => {
    const random = rng(8);
    const q = randomTensor(rt, "f32", [1, 3, 4, 16], random);
    const k = randomTensor(rt, "f32", [1, 2, 4, 16], random);
    await assert.rejects(gpuFlashAttention(gpu, rt, { q, k, v: k }), (e: Error) => e instanceof ArgumentError && /numHeads must be a multiple of numKvHeads 2/.test(e.message));
    const qd = randomTensor(rt, "f32", [1, 2, 1, 16], random);
    await assert.rejects(gpuIncreFlashAttention(gpu, rt, { q: qd, k, v: k, actualSeqLengths: [5] }), (e: Error) => e instanceof ArgumentError && /actualSeqLengths\[0\] must be ≤ 4/.test(e.message));
    freeAll(rt, { q, k, qd });
  });

  gpuTest("a device lost during a call fails that call with a GpuError, and the runtime goes on", async () => {
    const random = rng(11);
    const own = (await GpuDevice.open({ device: "webgpu" }))!;
    const o = { q: randomTensor(rt, "f32", [1, 2, 7, 64], random), k: randomTensor(rt, "f32", [1, 2, 97, 64], random), v: randomTensor(rt, "f32", [1, 2, 97, 64], random) };
    const call = gpuFlashAttention(own, rt, o);
    own.device.destroy(); // as a driver reset would, while the call is in flight
    await assert.rejects(call, (e: Error) => e instanceof GpuError && /device was lost/.test(e.message));
    await assert.rejects(gpuFlashAttention(own, rt, o), GpuError);
    own.destroy();
    const got = await poisoned(rt, o.q, "BNSD", (out, lse) => gpuFlashAttention(gpu, rt, { ...o, out, lse }));
    assertGpuClose("the other device still computes", got, referenceFlashAttention(o), 64);
    freeAll(rt, o);
  });
});

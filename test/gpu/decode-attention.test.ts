// The decode kernel's own edges (src/gpu/wgsl/decode-attention.ts) and the
// GPU plan's chunk cuts (src/gpu/attention-plan.ts): the cut bounds on the
// CPU (no adapter needed), then against the float64 reference on the
// adapter: a head dim that is not a multiple of 4 (the element-by-element
// load path), one and two rows a work item (R = 1, 2), a sequence cut into
// more chunks than the merge's invocations per dim (65 > 16) and chunks whose
// length is no multiple of the kernel's 16 keys an iteration, f32 / f16 /
// bf16 caches; the f16 case also without subgroups (the other fallback
// shapes are in attention.test.ts). out and lse are poisoned with
// NaN first. Tolerances: support.ts (GPU_OUT_TOL, GPU_LSE_TOL).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type DType, type Runtime, type Tensor, createRuntime, referenceIncreFlashAttention } from "../../src/ops-entry.js";
import { GpuDevice, gpuIncreFlashAttention } from "../../src/gpu/index.js";
import { DECODE_MIN_CHUNK, DECODE_TARGET_ITEMS, buildGpuPlan, decodeChunkLength, refineBounds } from "../../src/gpu/attention-plan.js";
import { freeAll, host, hostCache, lseShapeOf, materialize, rng, uniform } from "../attention/support.js";
import { DECODE_RMAX, decodeAttentionWgsl, decodeLanes, decodeRows, decodeWorkgroupBytes } from "../../src/gpu/wgsl/decode-attention.js";
import { assertGpuClose, openTestGpu } from "./support.js";

const opened = await openTestGpu();
const gpuTest = (name: string, fn: () => Promise<void>) => test(name, { skip: opened.skip }, fn);

describe("GPU plan: decode chunk cuts", () => {
  test("refineBounds cuts each chunk into near-equal pieces of at most len keys and keeps the plan's own bounds", () => {
    assert.deepEqual(refineBounds([0, 1000], 64), Array.from({ length: 17 }, (_, k) => Math.round((1000 * k) / 16)));
    assert.deepEqual(refineBounds([0, 100, 130], 64), [0, 50, 100, 130]);
    assert.deepEqual(refineBounds([0, 0], 64), [0, 0], "an empty sequence stays one empty chunk");
    assert.deepEqual(refineBounds([0, 7], 64), [0, 7]);
    for (const [sk, len] of [[4100, 64], [333, 64], [97, 128]] as const) {
      const b = refineBounds([0, sk], len);
      assert.equal(b[0], 0);
      assert.equal(b.at(-1), sk);
      for (let i = 1; i < b.length; i++) assert.ok(b[i]! - b[i - 1]! <= len && b[i]! - b[i - 1]! >= 1, `piece ${i} of ${sk} keys at ${len}`);
    }
  });

  test("decodeChunkLength: few KV heads over long sequences are cut to fill DECODE_TARGET_ITEMS; enough items are left alone", () => {
    const seq = (sk: number, sq = 1) => ({ q0: 0, sq, k0: 0, sk });
    // The bench's shape: B = 1, Hkv = 8, G = 4 (one row tile of 4): 4096 keys → 64-key chunks (512 items), 16384 → 128 (1024 items).
    assert.equal(decodeChunkLength([seq(4096)], 8, 4, 4), DECODE_MIN_CHUNK);
    assert.equal(decodeChunkLength([seq(16384)], 8, 4, 4), 128);
    const t = buildGpuPlan([seq(16384)], [[0, 8192, 16384]], 8, 4, 4, null, true);
    assert.equal(t.nItems, DECODE_TARGET_ITEMS);
    assert.equal(t.slots, 128);
    // A batch with DECODE_TARGET_ITEMS units already: no cut, the plan's chunks stay.
    const many = Array.from({ length: DECODE_TARGET_ITEMS / 8 }, () => seq(4096));
    assert.equal(decodeChunkLength(many, 8, 4, 4), Infinity);
    const t2 = buildGpuPlan(many, many.map(() => [0, 4096]), 8, 4, 4, null, true);
    assert.equal(t2.slots, 0, "no sequence split");
    // Prefill (FlashAttention-2) plans are never cut.
    assert.equal(buildGpuPlan([seq(16384)], [[0, 16384]], 8, 4, 4, null, false).slots, 0);
  });
});

describe("decode kernel shape", () => {
  test("lanes a key row: 32, fewer for short rows (≥ 4 elements a lane) or narrower subgroups; rows a power of two ≤ DECODE_RMAX", () => {
    assert.equal(decodeLanes(128, 32), 32);
    assert.equal(decodeLanes(256, 64), 32);
    assert.equal(decodeLanes(64, 32), 16);
    assert.equal(decodeLanes(128, 4), 4, "SwiftShader's subgroups of 4");
    assert.equal(decodeLanes(128, null), 32, "no subgroups: workgroup memory, any width");
    assert.deepEqual([1, 2, 3, 4, 5, 7, 8].map(decodeRows), [1, 2, 4, 4, 8, 8, 8]);
    assert.equal(decodeRows(DECODE_RMAX + 3), DECODE_RMAX);
  });

  test("workgroup memory: the subgroup kernel fits WebGPU's 16 KiB default limit at every shape; the fallback's, at L = 32, needs the halving chooseAttentionKernel does", () => {
    for (const DMAX of [64, 128, 256]) {
      for (const R of [1, 2, 4, 8]) assert.ok(decodeWorkgroupBytes({ DMAX, R, L: decodeLanes(DMAX, 32), subgroups: true }) <= 16384, `DMAX ${DMAX}, R ${R}`);
    }
    assert.ok(decodeWorkgroupBytes({ DMAX: 256, R: 8, L: 32, subgroups: false }) > 16384);
    assert.ok(decodeWorkgroupBytes({ DMAX: 256, R: 8, L: 8, subgroups: false }) <= 16384);
    assert.throws(() => decodeAttentionWgsl({ DMAX: 64, R: 4, L: 32, subgroups: true }), RangeError, "fewer than 4 elements a lane");
  });
});

describe("WebGPU decode kernel edges against the float64 reference", () => {
  let rt: Runtime;
  let gpu: GpuDevice;
  let plain: GpuDevice;
  before(async () => {
    rt = await createRuntime({ threads: 1 });
    if (opened.gpu) {
      gpu = opened.gpu;
      plain = (await GpuDevice.open({ device: "webgpu", disable: ["subgroups"] }))!;
    }
  });
  after(async () => {
    opened.gpu?.destroy();
    plain?.destroy();
    await rt.dispose();
  });

  /** Against the reference, with the adapter's features and (plainToo) without subgroups; the operator's plan and splitKv = 1 (which the GPU plan cuts too). */
  async function check(name: string, dtype: DType, H: number, Hkv: number, D: number, lengths: number[], seed: number, plainToo: boolean): Promise<void> {
    const random = rng(seed);
    const B = lengths.length;
    const S = Math.max(...lengths);
    const spec = {
      q: host("f32", [B, H, 1, D], Float32Array.from(uniform(B * H * D, random))),
      k: hostCache(dtype, "BNSD", B, Hkv, S, D, lengths, random),
      v: hostCache(dtype, "BNSD", B, Hkv, S, D, lengths, random),
    };
    const o = { ...materialize(rt, spec), actualSeqLengths: lengths };
    const ref = referenceIncreFlashAttention(o);
    try {
      const devices = [["adapter features", gpu], ["no subgroups", plain]] as const;
      for (const [which, device] of plainToo ? devices : devices.slice(0, 1)) {
        for (const splitKv of [undefined, 1]) {
          const out: Tensor = rt.tensor("f32", o.q.shape).fill(NaN);
          const lse: Tensor = rt.tensor("f32", lseShapeOf("BNSD", o.q)).fill(NaN);
          try {
            await gpuIncreFlashAttention(device, rt, { ...o, ...(splitKv === undefined ? {} : { splitKv }), out, lse });
            assertGpuClose(`${name}, ${which}, splitKv=${splitKv}`, { out: out.toFloat32(), lse: lse.toFloat32() }, ref, D);
          } finally {
            rt.free(out);
            rt.free(lse);
          }
        }
      }
    } finally {
      freeAll(rt, o);
    }
  }

  gpuTest("D = 50 (rows read element by element), G = 2 (R = 2), f16 (with and without subgroups) and bf16: lengths 1, 7, 333 and 4100 (65 chunks of ≤ 64 keys, none a multiple of 16)", async () => {
    await check("f16 D=50", "f16", 2, 1, 50, [1, 7, 333, 4100], 31, true);
    await check("bf16 D=50", "bf16", 2, 1, 50, [4100, 333, 7, 1], 32, false);
  });

  gpuTest("D = 128, G = 1 (R = 1), f32: lengths 97 and 2000 over 2 KV heads", async () => {
    await check("f32 D=128", "f32", 2, 2, 128, [97, 2000], 33, false);
  });
});

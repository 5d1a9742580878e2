// Validation happens before any kernel runs: each bad input throws an
// ArgumentError naming the argument and the value, leaves a preallocated
// output untouched and allocates nothing.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ArgumentError, type Runtime, Tensor, createRuntime, flashAttention, increFlashAttention } from "../../src/ops-entry.js";

describe("attention argument checks", () => {
  let rt: Runtime;
  let t: Record<string, Tensor>;
  before(async () => {
    rt = await createRuntime({ threads: 2 });
    const f32 = (shape: number[]) => rt.tensor("f32", shape).fill(0.5);
    t = {
      q: f32([2, 8, 5, 16]), // BNSD, H = 8
      k: f32([2, 2, 7, 16]), // Hkv = 2
      v: f32([2, 2, 7, 16]),
      k3: f32([2, 3, 7, 16]),
      v6: f32([2, 2, 6, 16]),
      kD8: f32([2, 2, 7, 8]),
      k16: rt.tensor("f16", [2, 2, 7, 16]),
      kI8: rt.tensor("int8", [2, 2, 7, 16]),
      qB3: f32([3, 8, 5, 16]),
      q17: f32([2, 8, 17, 16]),
      qD300: f32([1, 1, 1, 300]),
      kD300: f32([1, 1, 1, 300]),
      out: f32([2, 8, 5, 16]),
      outBad: f32([2, 8, 5, 15]),
      lseBad: f32([2, 5, 8]),
      bias: f32([2, 8, 5, 7]),
      biasBad: f32([3, 1, 5, 7]),
      maskBad: rt.tensor("uint8", [5, 6]),
      maskF32: f32([5, 7]),
      alibiBad: f32([7]),
      qTnd: f32([12, 8, 16]),
      kTnd: f32([20, 2, 16]),
      cache: f32([2, 2, 64, 16]),
      qDec: f32([2, 8, 1, 16]),
    };
    t["strided"] = new Tensor(rt.memory, t["q"]!.ptr, "f32", [2, 8, 5, 8], [640, 80, 16, 2]);
  });
  after(() => rt.dispose());

  const prefillCases: [string, () => object, RegExp][] = [
    ["q not a tensor", () => ({ q: [1, 2], k: t["k"], v: t["v"] }), /^q must be a Tensor, got \[1, 2\]/],
    ["bad layout", () => ({ q: t["q"], k: t["k"], v: t["v"], layout: "NHD" }), /^layout must be one of "BNSD" \| "BSND" \| "TND", got "NHD"/],
    ["numHeads % numKvHeads", () => ({ q: t["q"], k: t["k3"], v: t["k3"] }), /^numHeads must be a multiple of numKvHeads 3 \(GQA\), got 8/],
    ["numHeads option disagrees", () => ({ q: t["q"], k: t["k"], v: t["v"], numHeads: 4 }), /^numHeads must match q's 8 heads, got 4/],
    ["numKvHeads option disagrees", () => ({ q: t["q"], k: t["k"], v: t["v"], numKvHeads: 1 }), /^numKvHeads must match k's 2 KV heads, got 1/],
    ["v length", () => ({ q: t["q"], k: t["k"], v: t["v6"] }), /^v\.shape must have k's 7 tokens, got 6/],
    ["head dims differ", () => ({ q: t["q"], k: t["kD8"], v: t["kD8"] }), /^k\.shape head dim must equal q's 16, got 8/],
    ["head dim too large", () => ({ q: t["qD300"], k: t["kD300"], v: t["kD300"] }), /^q\.shape head dim must be in \[1, 256\], got 300/],
    ["k/v dtypes differ", () => ({ q: t["q"], k: t["k16"], v: t["v"] }), /^v\.dtype must equal k\.dtype "f16", got "f32"/],
    ["int8 KV", () => ({ q: t["q"], k: t["kI8"], v: t["kI8"] }), /^k\.dtype must be one of f32 \| f16 \| bf16, got "int8"/],
    ["q in f16", () => ({ q: t["k16"], k: t["k"], v: t["v"] }), /^q\.dtype must be "f32", got "f16"/],
    ["batch differs", () => ({ q: t["qB3"], k: t["k"], v: t["v"] }), /^k\.shape batch must equal q's 3, got 2/],
    ["rank for the layout", () => ({ q: t["q"], k: t["k"], v: t["v"], layout: "TND", cuSeqlensQ: [0, 2], cuSeqlensK: [0, 2] }), /^q\.shape must have rank 3 \[T, N, D\] for layout TND, got \[2, 8, 5, 16\]/],
    ["non-contiguous head dim", () => ({ q: t["strided"], k: t["kD8"], v: t["kD8"] }), /^q\.strides must have a contiguous head dim \(last stride 1\), got \[640, 80, 16, 2\]/],
    ["out shape", () => ({ q: t["q"], k: t["k"], v: t["v"], out: t["outBad"] }), /^out\.shape must equal q\.shape \[2, 8, 5, 16\], got \[2, 8, 5, 15\]/],
    ["lse shape", () => ({ q: t["q"], k: t["k"], v: t["v"], lse: t["lseBad"] }), /^lse\.shape must be \[2, 8, 5\] for layout BNSD, got \[2, 5, 8\]/],
    ["bias does not broadcast", () => ({ q: t["q"], k: t["k"], v: t["v"], bias: t["biasBad"] }), /^bias\.shape \[3, 1, 5, 7\] does not broadcast to \[2, 8, 5, 7\]: dimension 0 is 3, needs 1 or 2/],
    ["mask does not broadcast", () => ({ q: t["q"], k: t["k"], v: t["v"], mask: t["maskBad"] }), /^mask\.shape \[5, 6\] does not broadcast to \[2, 8, 5, 7\]: dimension 1 is 6, needs 1 or 7/],
    ["mask dtype", () => ({ q: t["q"], k: t["k"], v: t["v"], mask: t["maskF32"] }), /^mask\.dtype must be "uint8" \(nonzero = masked out\), got "f32"/],
    ["alibi shape", () => ({ q: t["q"], k: t["k"], v: t["v"], alibiSlopes: t["alibiBad"] }), /^alibiSlopes\.shape must be \[8\] or \[2, 8\], got \[7\]/],
    ["window", () => ({ q: t["q"], k: t["k"], v: t["v"], window: [3, -2] }), /^window\[1\] must be ≥ -1, got -2/],
    ["window shape", () => ({ q: t["q"], k: t["k"], v: t["v"], window: 3 }), /^window must be \[left, right\], got 3/],
    ["softcap", () => ({ q: t["q"], k: t["k"], v: t["v"], softcap: -1 }), /^softcap must be ≥ 0, got -1/],
    ["scale", () => ({ q: t["q"], k: t["k"], v: t["v"], scale: NaN }), /^scale must be a finite number, got NaN/],
    ["causal", () => ({ q: t["q"], k: t["k"], v: t["v"], causal: 1 }), /^causal must be a boolean, got 1/],
    ["cuSeqlens outside TND", () => ({ q: t["q"], k: t["k"], v: t["v"], cuSeqlensQ: [0, 5] }), /^cuSeqlensQ is only for layout TND, got it with BNSD/],
    ["cuSeqlensQ missing", () => ({ q: t["qTnd"], k: t["kTnd"], v: t["kTnd"], layout: "TND" }), /^cuSeqlensQ is required for layout TND/],
    ["cuSeqlensQ not monotone", () => ({ q: t["qTnd"], k: t["kTnd"], v: t["kTnd"], layout: "TND", cuSeqlensQ: [0, 8, 5, 12], cuSeqlensK: [0, 8, 9, 20] }), /^cuSeqlensQ\[2\] must be ≥ cuSeqlensQ\[1\] = 8 \(offsets are non-decreasing\), got 5/],
    ["cuSeqlensQ total", () => ({ q: t["qTnd"], k: t["kTnd"], v: t["kTnd"], layout: "TND", cuSeqlensQ: [0, 5, 11], cuSeqlensK: [0, 8, 20] }), /^cuSeqlensQ\[2\] must equal q's 12 tokens, got 11/],
    ["cuSeqlensK beyond k", () => ({ q: t["qTnd"], k: t["kTnd"], v: t["kTnd"], layout: "TND", cuSeqlensQ: [0, 5, 12], cuSeqlensK: [0, 8, 21] }), /^cuSeqlensK\[2\] must be ≤ k's 20 tokens, got 21/],
    ["cuSeqlensK fractional", () => ({ q: t["qTnd"], k: t["kTnd"], v: t["kTnd"], layout: "TND", cuSeqlensQ: [0, 5, 12], cuSeqlensK: [0, 8.5, 20] }), /^cuSeqlensK\[1\] must be an integer, got 8.5/],
    ["cuSeqlensK[0]", () => ({ q: t["qTnd"], k: t["kTnd"], v: t["kTnd"], layout: "TND", cuSeqlensQ: [0, 5, 12], cuSeqlensK: [1, 8, 20] }), /^cuSeqlensK\[0\] must be 0, got 1/],
    ["cuSeqlens lengths differ", () => ({ q: t["qTnd"], k: t["kTnd"], v: t["kTnd"], layout: "TND", cuSeqlensQ: [0, 5, 12], cuSeqlensK: [0, 20] }), /^cuSeqlensK must have 3 offsets like cuSeqlensQ, got 2/],
  ];

  const decodeCases: [string, () => object, RegExp][] = [
    ["negative length", () => ({ q: t["qDec"], k: t["cache"], v: t["cache"], actualSeqLengths: [3, -1] }), /^actualSeqLengths\[1\] must be ≥ 0, got -1/],
    ["fractional length", () => ({ q: t["qDec"], k: t["cache"], v: t["cache"], actualSeqLengths: [2.5, 1] }), /^actualSeqLengths\[0\] must be an integer, got 2.5/],
    ["length beyond capacity", () => ({ q: t["qDec"], k: t["cache"], v: t["cache"], actualSeqLengths: [65, 1] }), /^actualSeqLengths\[0\] must be ≤ 64 \(the cache capacity\), got 65/],
    ["lengths count", () => ({ q: t["qDec"], k: t["cache"], v: t["cache"], actualSeqLengths: [5] }), /^actualSeqLengths must have 2 entries \(one per sequence\), got 1/],
    ["Sq > 16", () => ({ q: t["q17"], k: t["cache"], v: t["cache"] }), /^q\.shape query length Sq must be in \[1, 16\] for decode, got 17/],
    ["TND", () => ({ q: t["qTnd"], k: t["kTnd"], v: t["kTnd"], layout: "TND" }), /^layout must be one of "BNSD" \| "BSND", got "TND"/],
    ["splitKv", () => ({ q: t["qDec"], k: t["cache"], v: t["cache"], splitKv: 0 }), /^splitKv must be an integer ≥ 1, got 0/],
    ["plan type", () => ({ q: t["qDec"], k: t["cache"], v: t["cache"], plan: {} }), /^plan must be an AttentionPlan, got \{\}/],
    ["bias over capacity", () => ({ q: t["qDec"], k: t["cache"], v: t["cache"], bias: t["bias"] }), /^bias\.shape \[2, 8, 5, 7\] does not broadcast to \[2, 8, 1, 64\]/],
  ];

  function expectRejected(call: () => unknown, pattern: RegExp): void {
    const out = t["out"]!;
    out.fill(0.25);
    const before = rt.heap.inUse;
    assert.throws(call, (e: unknown) => {
      assert.ok(e instanceof ArgumentError, `an ArgumentError, got ${String(e)}`);
      assert.match(e.message, pattern);
      return true;
    });
    assert.equal(rt.heap.inUse, before, "nothing allocated");
    assert.ok(out.toFloat32().every((x) => x === 0.25), "out untouched");
  }

  for (const [name, options, pattern] of prefillCases) {
    test(`flashAttention: ${name}`, () => expectRejected(() => flashAttention(rt, { out: t["out"], ...options() } as never), pattern));
  }
  for (const [name, options, pattern] of decodeCases) {
    test(`increFlashAttention: ${name}`, () => expectRejected(() => increFlashAttention(rt, { out: t["out"], ...options() } as never), pattern));
  }

  test("without out/lse the results are allocated (rt.tensor) in the layout's shapes", () => {
    rt.free(flashAttention(rt, { q: t["q"]!, k: t["k"]!, v: t["v"]! }).out); // the per-thread scratch stays allocated
    const before = rt.heap.inUse;
    const r = flashAttention(rt, { q: t["qTnd"]!, k: t["kTnd"]!, v: t["kTnd"]!, layout: "TND", cuSeqlensQ: [0, 12], cuSeqlensK: [0, 20], returnLse: true });
    assert.deepEqual(r.out.shape, [12, 8, 16]);
    assert.deepEqual(r.lse!.shape, [12, 8]);
    assert.ok(rt.heap.inUse > before);
    rt.free(r.out);
    rt.free(r.lse!);
    assert.equal(rt.heap.inUse, before);
    const d = increFlashAttention(rt, { q: t["qDec"]!, k: t["cache"]!, v: t["cache"]! });
    assert.equal(d.lse, undefined);
    rt.free(d.out);
  });
});

// RoPE: inv_freq as transformers computes it (default, linear, llama3), the
// rotation against the float64 reference for q [T, H, D] and k [T, Hkv, D]
// (head dims 64, 80, 128, partial rotary, strided fused-QKV views, large
// positions), config parsing, table reuse.
//
// Tolerance: |out − ref| ≤ 4 · 2⁻²⁴ · (|x_i| + |x_{i+R/2}|) — cos/sin rounded
// to f32 and three f32 roundings; both sides use the same f32 angle.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ArgumentError, Rope, type RopeTable, type Runtime, Tensor, createRuntime, ropeInvFreq } from "../../src/ops-entry.js";
import { ropeReference } from "../../src/ops/reference/rope.js";
import { assertWithin, randn, rng } from "../helpers/random.js";

const U = 2 ** -24;

/** transformers' _compute_llama3_parameters, transcribed with f32 tensors (Math.fround at each op). */
function transformersLlama3(dim: number, base: number, factor: number, low: number, high: number, oldLen: number): number[] {
  const f = Math.fround;
  const out: number[] = [];
  for (let i = 0; i < dim; i += 2) {
    const inv = f(1 / f(Math.pow(base, f(i / dim))));
    const wavelen = f((2 * Math.PI) / inv);
    let v = wavelen > oldLen / low ? f(inv / factor) : inv;
    const smooth = f(f(f(oldLen / wavelen) - low) / (high - low));
    const smoothed = f(f(f(f(1 - smooth) * v) / factor) + f(smooth * v));
    const medium = !(wavelen < oldLen / high) && !(wavelen > oldLen / low);
    if (medium) v = smoothed;
    out.push(v);
  }
  return out;
}

describe("rope", () => {
  let rt: Runtime;
  before(async () => {
    rt = await createRuntime({ threads: 2 });
  });
  after(() => rt.dispose());

  test("inv_freq: default theta^(−2i/R), linear ÷ factor, llama3 as transformers (Llama 3.1 8B's config)", () => {
    const def = ropeInvFreq({ headDim: 64, theta: 10000 });
    assert.equal(def.length, 32);
    for (let i = 0; i < 32; i++) assert.ok(Math.abs(def[i]! - 10000 ** (-i / 32)) <= 1e-15 * def[i]!);
    const lin = ropeInvFreq({ headDim: 64, theta: 10000, scaling: { type: "linear", factor: 4 } });
    for (let i = 0; i < 32; i++) assert.equal(lin[i], def[i]! / 4);

    const scaling = { type: "llama3", factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 } as const;
    const l3 = ropeInvFreq({ headDim: 128, theta: 500000, scaling });
    const hf = transformersLlama3(128, 500000, 8, 1, 4, 8192);
    const plain = ropeInvFreq({ headDim: 128, theta: 500000 });
    let high = 0;
    let medium = 0;
    let lowCount = 0;
    for (let i = 0; i < 64; i++) {
      assert.ok(Math.abs(l3[i]! - hf[i]!) <= 4e-7 * hf[i]!, `inv_freq[${i}]: ${l3[i]} vs transformers ${hf[i]}`);
      const wavelen = (2 * Math.PI) / plain[i]!;
      if (wavelen < 2048) (high++, assert.equal(l3[i], plain[i]));
      else if (wavelen > 8192) (lowCount++, assert.equal(l3[i], plain[i]! / 8));
      else (medium++, assert.ok(l3[i]! < plain[i]! && l3[i]! > plain[i]! / 8));
    }
    assert.deepEqual([high, medium, lowCount], [29, 6, 29]);
  });

  test("longrope (Phi-3): inv_freq ÷ the short factors, or the long ones past the original context; the table's cos and sin × the attention factor", () => {
    const scaling = { type: "longrope", shortFactor: [1, 2, 3], longFactor: [4, 5, 6], originalMaxPositionEmbeddings: 16, attentionFactor: 1.25 } as const;
    const plain = ropeInvFreq({ headDim: 8, rotaryDim: 6 });
    const short = ropeInvFreq({ headDim: 8, rotaryDim: 6, scaling, maxPositions: 16 });
    const long = ropeInvFreq({ headDim: 8, rotaryDim: 6, scaling, maxPositions: 17 });
    plain.forEach((f, i) => {
      assert.ok(Math.abs(short[i]! - f / scaling.shortFactor[i]!) <= 1e-15 * f, `short ${i}`);
      assert.ok(Math.abs(long[i]! - f / scaling.longFactor[i]!) <= 1e-15 * f, `long ${i}`);
    });
    const rope = new Rope(rt, { headDim: 8, rotaryDim: 6, scaling, maxPositions: 64 });
    const table = rope.table([0, 3, 40]);
    const cos = table.cos.toFloat32();
    const sin = table.sin.toFloat32();
    [0, 3, 40].forEach((p, t) =>
      rope.invFreq.forEach((f, i) => {
        const a = Math.fround(Math.fround(p) * f);
        assert.ok(Math.abs(cos[t * 3 + i]! - 1.25 * Math.cos(a)) <= 4e-7 && Math.abs(sin[t * 3 + i]! - 1.25 * Math.sin(a)) <= 4e-7, `position ${p}, frequency ${i}`);
      }),
    );
    table.free();
    rope.free();
    assert.throws(() => ropeInvFreq({ headDim: 8, rotaryDim: 6, scaling: { ...scaling, longFactor: [1, 2] }, maxPositions: 64 }), /scaling\.longFactor must hold rotaryDim \/ 2 = 3 factors, got 2/);
  });

  test("scaling options are validated by name", () => {
    assert.throws(() => ropeInvFreq({ headDim: 64, scaling: { type: "yarn" } as never }), (e: unknown) => e instanceof ArgumentError && /"default" \| "linear" \| "llama3" \| "longrope", got "yarn"/.test(e.message));
    assert.throws(() => ropeInvFreq({ headDim: 64, scaling: { type: "linear", factor: 0 } }), /scaling.factor must be > 0, got 0/);
    assert.deepEqual(ropeInvFreq({ headDim: 8, scaling: { type: "default" } }), ropeInvFreq({ headDim: 8 }));
  });

  const CASES = [
    { headDim: 64, rotaryDim: 64, H: 14, Hkv: 2, T: 5, theta: 1e6 },
    { headDim: 80, rotaryDim: 80, H: 3, Hkv: 1, T: 7, theta: 10000 },
    { headDim: 128, rotaryDim: 128, H: 4, Hkv: 2, T: 3, theta: 500000, scaling: { type: "llama3" as const, factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositionEmbeddings: 8192 } },
    { headDim: 64, rotaryDim: 32, H: 2, Hkv: 2, T: 4, theta: 10000 },
    { headDim: 6, rotaryDim: 6, H: 1, Hkv: 1, T: 2, theta: 10000, scaling: { type: "linear" as const, factor: 2 } },
  ];

  for (const c of CASES) {
    test(`q [${c.T}, ${c.H}, ${c.headDim}] and k [${c.T}, ${c.Hkv}, ${c.headDim}], rotary ${c.rotaryDim}${c.scaling ? `, ${c.scaling.type}` : ""}: matches the reference`, () => {
      const rope = new Rope(rt, c);
      const r = rng(c.headDim * 31 + c.T);
      const positions = Array.from({ length: c.T }, (_, i) => (i === 0 ? 0 : i === 1 ? 131071 : Math.floor(r() * 40000)));
      const qv = randn(c.T * c.H * c.headDim, 1);
      const kv = randn(c.T * c.Hkv * c.headDim, 2);
      const q = rt.tensor("f32", [c.T, c.H, c.headDim]).set(qv);
      const k = rt.tensor("f32", [c.T, c.Hkv, c.headDim]).set(kv);
      const table = rope.table(positions);
      rope.apply({ q, k, table });
      const half = c.rotaryDim / 2;
      for (const [name, t, v, heads] of [["q", q, qv, c.H], ["k", k, kv, c.Hkv]] as const) {
        const want = ropeReference(v, positions, rope.invFreq, { tokens: c.T, heads, headDim: c.headDim, rotaryDim: c.rotaryDim });
        const tol = (i: number) => {
          const d = i % c.headDim;
          if (d >= c.rotaryDim) return 0;
          const j = d < half ? i + half : i - half;
          return 4 * U * (Math.abs(v[i]!) + Math.abs(v[j]!)) + 1e-30;
        };
        assertWithin(t.toFloat32(), want, tol, name);
      }
      // Position 0 is the identity.
      assert.deepEqual(q.toFloat32().subarray(0, c.H * c.headDim), qv.subarray(0, c.H * c.headDim));
      table.free();
      rope.free();
      rt.free(q);
      rt.free(k);
    });
  }

  test("q and k as strided views of a fused QKV output; tables reused across steps", () => {
    const T = 4;
    const H = 4;
    const Hkv = 2;
    const D = 16;
    const width = (H + 2 * Hkv) * D;
    const qkv = rt.tensor("f32", [T, width]).set(randn(T * width, 5));
    const before = qkv.toFloat32();
    const q = new Tensor(rt.memory, qkv.ptr, "f32", [T, H, D], [width, D, 1]);
    const k = new Tensor(rt.memory, qkv.ptr + H * D * 4, "f32", [T, Hkv, D], [width, D, 1]);
    const rope = new Rope(rt, { headDim: D, theta: 10000 });
    let table: RopeTable = rope.table([3]);
    const first = table;
    table = rope.table([10, 11, 12, 13], table);
    assert.equal(table.tokens, 4);
    assert.ok(first.freed || first === table, "a too-small table is freed, a large one is reused");
    rope.apply({ q, k, table });
    const after = qkv.toFloat32();
    const qRef = ropeReference(before.filter((_, i) => i % width < H * D), [10, 11, 12, 13], rope.invFreq, { tokens: T, heads: H, headDim: D, rotaryDim: D });
    const qGot = after.filter((_, i) => i % width < H * D);
    assertWithin(qGot, qRef, () => 1e-6, "q");
    for (let i = 0; i < before.length; i++) if (i % width >= (H + Hkv) * D) assert.equal(after[i], before[i], "v untouched");
    const again = rope.table([1, 2], table);
    assert.equal(again, table, "a table with room is reused");
    assert.equal(again.tokens, 2);
    table.free();
    rope.free();
    rt.free(qkv);
  });

  test("bad arguments are refused by name", () => {
    const rope = new Rope(rt, { headDim: 8 });
    const table = rope.table([0, 1]);
    const check = (fn: () => unknown, argument: string, text: RegExp) =>
      assert.throws(fn, (e: unknown) => e instanceof ArgumentError && e.argument === argument && text.test(e.message));
    check(() => rope.table([0, -1]), "positions[1]", /got -1/);
    check(() => rope.table([0.5]), "positions[0]", /got 0.5/);
    check(() => rope.apply({ q: rt.tensor("f32", [3, 2, 8]), table }), "q.shape[0]", /must be 2/);
    check(() => rope.apply({ q: rt.tensor("f32", [2, 2, 6]), table }), "q.shape[2]", /must be 8 \(headDim\)/);
    check(() => rope.apply({ q: rt.tensor("f32", [2, 16]), table }), "q.shape", /\[T, heads, 8\]/);
    check(() => new Rope(rt, { headDim: 8, rotaryDim: 5 }), "rotaryDim", /even/);
    check(() => new Rope(rt, { headDim: 8, rotaryDim: 10 }), "rotaryDim", /≤ 8/);
    check(() => new Rope(rt, { headDim: 8, scaling: { type: "linear", factor: 0 } }), "scaling.factor", /> 0/);
    table.free();
    check(() => rope.apply({ q: rt.tensor("f32", [2, 2, 8]), table }), "table", /live RopeTable/);
    rope.free();
  });
});

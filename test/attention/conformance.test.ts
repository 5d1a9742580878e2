// Properties of attention with answers known independently of any
// implementation, checked on both the float64 reference and the wasm kernels:
// one key, zero queries (uniform weights over exactly the kept keys), rows
// with no kept key (o = 0, lse = −Infinity, never NaN), layout invariance,
// GQA = MHA over repeated K/V, ALiBi = its explicit bias, softcap = its
// explicit formula, a row-constant bias shifts lse only.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type Runtime, type Tensor, createRuntime } from "../../src/ops-entry.js";
import { IMPLEMENTATIONS, assertClose, assertIdentical, freeAll, randomTensor, rng, tensorOf, uniform } from "./support.js";

/** Expected (o, lse) when every score is 0: o = mean of the kept v rows, lse = ln(count). */
function uniformExpectation(v: Float32Array, D: number, kept: number[]): { o: number[]; lse: number } {
  if (kept.length === 0) return { o: new Array<number>(D).fill(0), lse: -Infinity };
  const o = new Array<number>(D).fill(0);
  for (const j of kept) for (let d = 0; d < D; d++) o[d]! += v[j * D + d]! / kept.length;
  return { o, lse: Math.log(kept.length) };
}

describe("attention properties (reference and wasm)", () => {
  let rt: Runtime;
  before(async () => {
    rt = await createRuntime();
  });
  after(() => rt.dispose());

  for (const impl of IMPLEMENTATIONS) {
    describe(impl.name, () => {
      test("one key: o = v₀ and lse = scale · q·k₀ (prefill and decode)", () => {
        const random = rng(11);
        const D = 24;
        const q = randomTensor(rt, "f32", [1, 2, 3, D], random);
        const k = randomTensor(rt, "f32", [1, 1, 1, D], random);
        const v = randomTensor(rt, "f32", [1, 1, 1, D], random);
        const qv = q.toFloat32();
        const kv = k.toFloat32();
        const vv = v.toFloat32();
        const r = impl.flash(rt, { q, k, v, scale: 0.3 });
        const out: number[] = [];
        const lse: number[] = [];
        for (let row = 0; row < 6; row++) {
          out.push(...vv);
          let dot = 0;
          for (let d = 0; d < D; d++) dot += qv[row * D + d]! * kv[d]!;
          lse.push(0.3 * dot);
        }
        assertClose("prefill, Sk = 1", r, { out, lse }, D);

        const cache = randomTensor(rt, "bf16", [2, 1, 9, D], random);
        const cacheV = randomTensor(rt, "bf16", [2, 1, 9, D], random);
        const qd = randomTensor(rt, "f32", [2, 2, 1, D], random);
        const d = impl.decode(rt, { q: qd, k: cache, v: cacheV, actualSeqLengths: [1, 1] });
        const cv = cacheV.toFloat32();
        const expect = [0, 0, 1, 1].flatMap((b) => Array.from(cv.subarray(b * 9 * D, b * 9 * D + D)));
        assertClose("decode, actual length 1", { out: d.out }, { out: expect, lse: [] }, D);
        freeAll(rt, { q, k, v, cache, cacheV, qd });
      });

      test("zero queries weigh exactly the kept keys equally: causal, window, mask, lengths", () => {
        const random = rng(12);
        const D = 7;
        const S = 9;
        const q = tensorOf(rt, "f32", [1, 1, S, D], new Float64Array(S * D));
        const k = randomTensor(rt, "f32", [1, 1, S, D], random);
        const v = randomTensor(rt, "f32", [1, 1, S, D], random);
        const maskBits = Float64Array.from({ length: S * S }, (_, x) => ((x * 7) % 5 === 0 ? 1 : 0));
        const mask = tensorOf(rt, "uint8", [S, S], maskBits);
        const vv = v.toFloat32();
        const cases: { name: string; options: object; keep: (i: number, j: number) => boolean }[] = [
          { name: "causal", options: { causal: true }, keep: (i, j) => j <= i },
          { name: "window [2, 1]", options: { window: [2, 1] }, keep: (i, j) => j >= i - 2 && j <= i + 1 },
          { name: "causal + window [3, -1]", options: { causal: true, window: [3, -1] }, keep: (i, j) => j <= i && j >= i - 3 },
          { name: "mask", options: { mask }, keep: (i, j) => maskBits[i * S + j] === 0 },
        ];
        for (const c of cases) {
          const r = impl.flash(rt, { q, k, v, ...c.options });
          const out: number[] = [];
          const lse: number[] = [];
          for (let i = 0; i < S; i++) {
            const e = uniformExpectation(vv, D, [...Array(S).keys()].filter((j) => c.keep(i, j)));
            out.push(...e.o);
            lse.push(e.lse);
          }
          assertClose(c.name, r, { out, lse }, D);
        }
        // Decode: the last query of a sequence of length n keeps keys [0, n).
        const qd = tensorOf(rt, "f32", [3, 1, 1, D], new Float64Array(3 * D));
        const kd = randomTensor(rt, "f32", [3, 1, S, D], random);
        const vd = randomTensor(rt, "f32", [3, 1, S, D], random);
        const lengths = [0, 4, 9];
        const r = impl.decode(rt, { q: qd, k: kd, v: vd, actualSeqLengths: lengths });
        const vdv = vd.toFloat32();
        const out: number[] = [];
        const lse: number[] = [];
        lengths.forEach((n, b) => {
          const e = uniformExpectation(vdv.subarray(b * S * D), D, [...Array(n).keys()]);
          out.push(...e.o);
          lse.push(e.lse);
        });
        assertClose("decode lengths", r, { out, lse }, D);
        freeAll(rt, { q, k, v, mask, qd, kd, vd });
      });

      test("rows with no kept key give o = 0 and lse = −Infinity, never NaN", () => {
        const random = rng(13);
        const D = 16;
        // Causal with Sk < Sq: the first Sq − Sk queries precede every key.
        const q = randomTensor(rt, "f32", [1, 2, 5, D], random);
        const k = randomTensor(rt, "f16", [1, 1, 3, D], random);
        const v = randomTensor(rt, "f16", [1, 1, 3, D], random);
        const r = impl.flash(rt, { q, k, v, causal: true });
        for (const h of [0, 1]) {
          for (const i of [0, 1]) {
            assert.equal(r.lse[h * 5 + i], -Infinity);
            for (let d = 0; d < D; d++) assert.equal(r.out[(h * 5 + i) * D + d], 0);
          }
          assert.ok(Number.isFinite(r.lse[h * 5 + 2]));
        }
        // A mask row of ones; a TND sequence without keys; a decode sequence of length 0.
        const mask = tensorOf(rt, "uint8", [1, 5, 3], Float64Array.from({ length: 15 }, (_, x) => (Math.floor(x / 3) === 3 ? 1 : 0)));
        const rm = impl.flash(rt, { q, k, v, mask });
        assert.equal(rm.lse[3], -Infinity);
        assert.equal(rm.lse[8], -Infinity);
        assert.ok(rm.out.slice(3 * D, 4 * D).every((x) => x === 0));
        const qt = randomTensor(rt, "f32", [6, 2, D], random);
        const kt = randomTensor(rt, "f32", [4, 1, D], random);
        const vt = randomTensor(rt, "f32", [4, 1, D], random);
        const rt2 = impl.flash(rt, { q: qt, k: kt, v: vt, layout: "TND", cuSeqlensQ: [0, 2, 6], cuSeqlensK: [0, 0, 4] });
        assert.deepEqual(Array.from(rt2.lse.slice(0, 4)), [-Infinity, -Infinity, -Infinity, -Infinity]);
        assert.ok(rt2.out.slice(0, 4 * D).every((x) => x === 0));
        assert.ok(Array.from(rt2.lse.slice(4)).every(Number.isFinite));
        const qd = randomTensor(rt, "f32", [2, 2, 1, D], random);
        const cache = randomTensor(rt, "f32", [2, 1, 8, D], random);
        const rd = impl.decode(rt, { q: qd, k: cache, v: cache, actualSeqLengths: [0, 8] });
        assert.deepEqual([rd.lse[0], rd.lse[1]], [-Infinity, -Infinity]);
        assert.ok(rd.out.slice(0, 2 * D).every((x) => x === 0));
        freeAll(rt, { q, k, v, mask, qt, kt, vt, qd, cache });
      });

      test("BNSD, BSND and TND give the same result on the same data", () => {
        const random = rng(14);
        const [B, H, Hkv, S, D] = [2, 4, 2, 19, 20];
        const qv = uniform(B * H * S * D, random);
        const kv = uniform(B * Hkv * S * D, random);
        const vv = uniform(B * Hkv * S * D, random);
        const toBSND = (x: Float64Array, N: number) => {
          const y = new Float64Array(x.length);
          for (let b = 0; b < B; b++) for (let n = 0; n < N; n++) for (let s = 0; s < S; s++) for (let d = 0; d < D; d++) y[((b * S + s) * N + n) * D + d] = x[((b * N + n) * S + s) * D + d]!;
          return y;
        };
        const bnsd = { q: tensorOf(rt, "f32", [B, H, S, D], qv), k: tensorOf(rt, "bf16", [B, Hkv, S, D], kv), v: tensorOf(rt, "bf16", [B, Hkv, S, D], vv) };
        const bsnd = { q: tensorOf(rt, "f32", [B, S, H, D], toBSND(qv, H)), k: tensorOf(rt, "bf16", [B, S, Hkv, D], toBSND(kv, Hkv)), v: tensorOf(rt, "bf16", [B, S, Hkv, D], toBSND(vv, Hkv)) };
        const tnd = { q: bsnd.q.reshape([B * S, H, D]), k: bsnd.k.reshape([B * S, Hkv, D]), v: bsnd.v.reshape([B * S, Hkv, D]) };
        const a = impl.flash(rt, { ...bnsd, causal: true });
        const b = impl.flash(rt, { ...bsnd, layout: "BSND", causal: true });
        const c = impl.flash(rt, { ...tnd, layout: "TND", causal: true, cuSeqlensQ: [0, S, 2 * S], cuSeqlensK: [0, S, 2 * S] });
        const bAsBnsd = new Float64Array(a.out.length);
        const b2 = Float64Array.from(b.out);
        for (let bb = 0; bb < B; bb++) for (let h = 0; h < H; h++) for (let s = 0; s < S; s++) for (let d = 0; d < D; d++) bAsBnsd[((bb * H + h) * S + s) * D + d] = b2[((bb * S + s) * H + h) * D + d]!;
        assertIdentical("BSND vs BNSD out", Float64Array.from(a.out), bAsBnsd);
        assertIdentical("TND vs BSND out", Float64Array.from(b.out), Float64Array.from(c.out));
        assertIdentical("TND vs BSND lse", Float64Array.from(b.lse), Float64Array.from(c.lse));
        freeAll(rt, bnsd, bsnd);
      });

      test("GQA equals MHA over K/V repeated per query head", () => {
        const random = rng(15);
        const [B, H, Hkv, S, D] = [1, 6, 2, 23, 32];
        const G = H / Hkv;
        const kv = uniform(B * Hkv * S * D, random);
        const vv = uniform(B * Hkv * S * D, random);
        const repeat = (x: Float64Array) => {
          const y = new Float64Array(H * S * D);
          for (let h = 0; h < H; h++) y.set(x.subarray(Math.floor(h / G) * S * D, (Math.floor(h / G) + 1) * S * D), h * S * D);
          return y;
        };
        const q = randomTensor(rt, "f32", [B, H, S, D], random);
        const gqa = { q, k: tensorOf(rt, "f32", [B, Hkv, S, D], kv), v: tensorOf(rt, "f32", [B, Hkv, S, D], vv) };
        const mha = { q, k: tensorOf(rt, "f32", [B, H, S, D], repeat(kv)), v: tensorOf(rt, "f32", [B, H, S, D], repeat(vv)) };
        const a = impl.flash(rt, { ...gqa, causal: true });
        const m = impl.flash(rt, { ...mha, causal: true });
        assertClose("GQA vs MHA", a, m, D);
        const qd = randomTensor(rt, "f32", [B, H, 2, D], random);
        const da = impl.decode(rt, { ...gqa, q: qd, actualSeqLengths: [17], causal: true });
        const dm = impl.decode(rt, { ...mha, q: qd, actualSeqLengths: [17], causal: true });
        assertClose("decode GQA vs MHA", da, dm, D);
        freeAll(rt, gqa, { k: mha.k, v: mha.v, qd });
      });

      test("ALiBi equals the explicit bias −slope_h·|i + Sk − Sq − j|; softcap equals its formula", () => {
        const random = rng(16);
        const [H, Sq, Sk, D] = [3, 5, 12, 8];
        const q = randomTensor(rt, "f32", [1, H, Sq, D], random, -3, 3);
        const k = randomTensor(rt, "f32", [1, 1, Sk, D], random, -3, 3);
        const v = randomTensor(rt, "f32", [1, 1, Sk, D], random);
        const slopes = [0.5, 0.25, 0.125];
        const alibi = tensorOf(rt, "f32", [H], slopes);
        const biasValues = new Float64Array(H * Sq * Sk);
        for (let h = 0; h < H; h++) for (let i = 0; i < Sq; i++) for (let j = 0; j < Sk; j++) biasValues[(h * Sq + i) * Sk + j] = -slopes[h]! * Math.abs(i + Sk - Sq - j);
        const bias = tensorOf(rt, "f32", [1, H, Sq, Sk], biasValues);
        assertClose("alibi vs bias", impl.flash(rt, { q, k, v, alibiSlopes: alibi, causal: true }), impl.flash(rt, { q, k, v, bias, causal: true }), D);
        // softcap 2 on scores s = q·k: the capped scores as an explicit bias on zero queries.
        const qv = q.toFloat32();
        const kv = k.toFloat32();
        const capped = new Float64Array(H * Sq * Sk);
        for (let h = 0; h < H; h++) {
          for (let i = 0; i < Sq; i++) {
            for (let j = 0; j < Sk; j++) {
              let s = 0;
              for (let d = 0; d < D; d++) s += qv[(h * Sq + i) * D + d]! * kv[j * D + d]!;
              capped[(h * Sq + i) * Sk + j] = 2 * Math.tanh(s / 2);
            }
          }
        }
        const cappedBias = tensorOf(rt, "f32", [1, H, Sq, Sk], capped);
        const zero = tensorOf(rt, "f32", [1, H, Sq, D], new Float64Array(H * Sq * D));
        assertClose("softcap", impl.flash(rt, { q, k, v, softcap: 2, scale: 1 }), impl.flash(rt, { q: zero, k, v, bias: cappedBias }), D);
        freeAll(rt, { q, k, v, alibi, bias, cappedBias, zero });
      });

      test("a bias constant along each row shifts lse by it and leaves o unchanged", () => {
        const random = rng(17);
        const [H, S, D] = [2, 10, 12];
        const q = randomTensor(rt, "f32", [1, H, S, D], random);
        const k = randomTensor(rt, "f32", [1, H, S, D], random);
        const v = randomTensor(rt, "f32", [1, H, S, D], random);
        const shifts = Float64Array.from({ length: S }, (_, i) => i - 4.5);
        const bias: Tensor = tensorOf(rt, "f32", [S, 1], shifts); // broadcast over batch, heads and keys
        const plain = impl.flash(rt, { q, k, v, causal: true });
        const shifted = impl.flash(rt, { q, k, v, causal: true, bias });
        const lse = Array.from(plain.lse, (x, idx) => x + shifts[idx % S]!);
        assertClose("shifted", shifted, { out: plain.out, lse }, D);
        freeAll(rt, { q, k, v, bias });
      });
    });
  }
});

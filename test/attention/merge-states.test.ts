// mergeStates: against the float64 reference, exact when a side is empty,
// in place, and the defining property — attention over two disjoint key
// segments, merged, is attention over their union (for both implementations).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { type Runtime, Tensor, createRuntime, mergeStates, referenceMergeStates } from "../../src/ops-entry.js";
import { IMPLEMENTATIONS, assertClose, assertIdentical, freeAll, randomTensor, rng, tensorOf, uniform } from "./support.js";

describe("mergeStates", () => {
  let rt: Runtime;
  before(async () => {
    rt = await createRuntime();
  });
  after(() => rt.dispose());

  function states(seed: number, rows: number, D: number, emptyA: (r: number) => boolean, emptyB: (r: number) => boolean) {
    const random = rng(seed);
    const lse = (empty: (r: number) => boolean) => Float64Array.from({ length: rows }, (_, r) => (empty(r) ? -Infinity : 20 * random() - 10));
    return {
      oA: tensorOf(rt, "f32", [rows, D], uniform(rows * D, random)),
      lseA: tensorOf(rt, "f32", [rows], lse(emptyA)),
      oB: tensorOf(rt, "f32", [rows, D], uniform(rows * D, random)),
      lseB: tensorOf(rt, "f32", [rows], lse(emptyB)),
    };
  }

  for (const D of [13, 64, 256]) {
    test(`matches the reference (D = ${D}, 200 rows, lse spread over ±10)`, () => {
      const s = states(D, 200, D, () => false, () => false);
      const r = mergeStates(rt, { ...s, out: rt.tensor("f32", [200, D]).fill(NaN), lseOut: rt.tensor("f32", [200]).fill(NaN) });
      const ref = referenceMergeStates(s.oA.toFloat32(), s.lseA.toFloat32(), s.oB.toFloat32(), s.lseB.toFloat32(), D);
      assertClose(`D=${D}`, { out: r.out.toFloat32(), lse: r.lse.toFloat32() }, ref, D);
      freeAll(rt, s, r);
    });
  }

  test("exact when either side is empty (lse = −Infinity): the other side passes through bit for bit", () => {
    const D = 24;
    const rows = 9;
    const s = states(5, rows, D, (r) => r % 3 === 0, (r) => r % 3 === 1 || r === 6);
    // The empty side's o is garbage (NaN) and must not leak.
    const a = s.oA.toFloat32();
    for (let r = 0; r < rows; r += 3) a.fill(NaN, r * D, (r + 1) * D);
    s.oA.set(a);
    const r = mergeStates(rt, s);
    const o = r.out.toFloat32();
    const l = r.lse.toFloat32();
    const oa = s.oA.toFloat32();
    const ob = s.oB.toFloat32();
    const la = s.lseA.toFloat32();
    const lb = s.lseB.toFloat32();
    for (let row = 0; row < rows; row++) {
      const got = o.subarray(row * D, (row + 1) * D);
      if (row === 6 || row === 0 || row === 3) {
        // row 6: both empty; rows 0, 3: a empty
        if (row === 6) {
          assert.ok(got.every((x) => x === 0), "both empty: o = 0");
          assert.equal(l[row], -Infinity);
        } else {
          assertIdentical(`row ${row} o`, got, ob.subarray(row * D, (row + 1) * D));
          assert.equal(l[row], lb[row]);
        }
      } else if (row % 3 === 1) {
        assertIdentical(`row ${row} o`, got, oa.subarray(row * D, (row + 1) * D));
        assert.equal(l[row], la[row]);
      } else {
        assert.ok(Number.isFinite(l[row]!) && l[row]! >= Math.max(la[row]!, lb[row]!));
      }
    }
    freeAll(rt, s, r);
  });

  test("in place: out = oA, lseOut = lseA", () => {
    const D = 32;
    const s = states(6, 70, D, () => false, (r) => r === 3);
    const ref = referenceMergeStates(s.oA.toFloat32(), s.lseA.toFloat32(), s.oB.toFloat32(), s.lseB.toFloat32(), D);
    const r = mergeStates(rt, { ...s, out: s.oA, lseOut: s.lseA });
    assert.equal(r.out, s.oA);
    assertClose("in place", { out: s.oA.toFloat32(), lse: s.lseA.toFloat32() }, ref, D);
    freeAll(rt, s);
  });

  for (const impl of IMPLEMENTATIONS) {
    test(`${impl.name}: attention over keys [0, m) merged with [m, n) equals attention over [0, n)`, () => {
      const random = rng(9);
      const [H, Sq, Sk, D] = [3, 6, 50, 16];
      const q = randomTensor(rt, "f32", [1, H, Sq, D], random, -2, 2);
      const k = randomTensor(rt, "f32", [1, 1, Sk, D], random, -2, 2);
      const v = randomTensor(rt, "f32", [1, 1, Sk, D], random);
      for (const m of [0, 1, 17, 30, 50]) {
        const masks = [(j: number) => j >= m, (j: number) => j < m].map((masked) => tensorOf(rt, "uint8", [Sk], Float64Array.from({ length: Sk }, (_, j) => (masked(j) ? 1 : 0))));
        const whole = impl.flash(rt, { q, k, v, window: [30, 2] });
        const parts = masks.map((mask) => impl.flash(rt, { q, k, v, window: [30, 2], mask }));
        let merged: { out: ArrayLike<number>; lse: ArrayLike<number> };
        if (impl.name === "reference") {
          merged = referenceMergeStates(parts[0]!.out, parts[0]!.lse, parts[1]!.out, parts[1]!.lse, D);
        } else {
          const t: Tensor[] = [
            tensorOf(rt, "f32", [1, H, Sq, D], parts[0]!.out),
            tensorOf(rt, "f32", [1, H, Sq], parts[0]!.lse),
            tensorOf(rt, "f32", [1, H, Sq, D], parts[1]!.out),
            tensorOf(rt, "f32", [1, H, Sq], parts[1]!.lse),
          ];
          const r = mergeStates(rt, { oA: t[0]!, lseA: t[1]!, oB: t[2]!, lseB: t[3]! });
          merged = { out: r.out.toFloat32(), lse: r.lse.toFloat32() };
          freeAll(rt, t, r);
        }
        assertClose(`split at ${m}`, merged, whole, D);
        freeAll(rt, masks);
      }
      freeAll(rt, { q, k, v });
    });
  }

  test("checks shapes, dtypes and contiguity, naming the argument", () => {
    const o = rt.tensor("f32", [4, 8]);
    const l = rt.tensor("f32", [4]);
    const l5 = rt.tensor("f32", [5]);
    const o16 = rt.tensor("f16", [4, 8]);
    assert.throws(() => mergeStates(rt, { oA: o, lseA: l5, oB: o, lseB: l }), /lseA\.shape must be \[4\], got \[5\]/);
    assert.throws(() => mergeStates(rt, { oA: o, lseA: l, oB: o16, lseB: l }), /oB\.dtype must be "f32", got "f16"/);
    assert.throws(() => mergeStates(rt, { oA: o, lseA: l, oB: o, lseB: l, out: rt.tensor("f32", [4, 9]) }), /out\.shape must be \[4, 8\], got \[4, 9\]/);
    const strided = new Tensor(rt.memory, o.ptr, "f32", [4, 4], [8, 1]);
    assert.throws(() => mergeStates(rt, { oA: strided, lseA: l, oB: strided, lseB: l }), /oA\.strides must be contiguous/);
    freeAll(rt, { o, l, l5, o16 });
  });
});

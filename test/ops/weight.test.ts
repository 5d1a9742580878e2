// Weight packing and quantization: every format decodes back to exactly what
// the reference quantizers (src/ops/reference/quantize.ts) produce, from every
// source dtype, for awkward shapes and concatenated sources; round-trip errors
// stay within the stated bounds; bad input is refused by name.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  ArgumentError,
  type Runtime,
  type Tensor,
  WEIGHT_FORMATS,
  WEIGHT_TILE_BYTES,
  type WeightFormat,
  createRuntime,
  createWeight,
  dequantizeWeight,
  encodeValue,
  roundTo,
  weightBytes,
} from "../../src/ops-entry.js";
import { type QuantizedRow, dequantizeRow, quantizeQ4, quantizeQ8 } from "../../src/ops/reference/quantize.js";
import { randn, relRms } from "../helpers/random.js";

/** What the Weight of `format` must decode to, row by row, from f32 source values. */
function expectedRows(format: WeightFormat, src: Float32Array, rows: number, cols: number): { values: Float64Array; quant?: QuantizedRow[] } {
  const values = new Float64Array(rows * cols);
  const quant: QuantizedRow[] = [];
  for (let r = 0; r < rows; r++) {
    const row = src.subarray(r * cols, (r + 1) * cols);
    if (format === "f32") values.set(row, r * cols);
    else if (format === "bf16") values.set(Array.from(row, (v) => roundTo("bf16", v)), r * cols);
    else {
      const q = format === "q8" ? quantizeQ8(row) : quantizeQ4(row);
      quant.push(q);
      values.set(dequantizeRow(q, cols), r * cols);
    }
  }
  return { values, quant };
}

describe("createWeight / dequantizeWeight", () => {
  let rt: Runtime;
  before(async () => {
    rt = await createRuntime({ threads: 2 });
  });
  after(() => rt.dispose());

  const SHAPES: [number, number][] = [
    [1, 1],
    [1, 32],
    [7, 97],
    [5, 80],
    [33, 64],
    [4, 31],
    [130, 200],
  ];

  for (const format of WEIGHT_FORMATS) {
    for (const srcDtype of ["f32", "f16", "bf16"] as const) {
      test(`${format} from ${srcDtype}: decodes to the reference quantization bit for bit`, () => {
        for (const [rows, cols] of SHAPES) {
          const raw = randn(rows * cols, rows * 1000 + cols, 0.5);
          const src = rt.tensor(srcDtype, [rows, cols]).set(raw);
          const srcValues = src.toFloat32(); // what the source holds after rounding to its dtype
          const w = createWeight(rt, { source: src, format });
          assert.equal(w.rows, rows);
          assert.equal(w.cols, cols);
          assert.equal(w.byteLength, weightBytes(format, rows, cols));
          const out = rt.tensor("f32", [rows, cols]).fill(NaN);
          dequantizeWeight(rt, { weight: w, out });
          const got = out.toFloat32();
          const { values } = expectedRows(format, srcValues, rows, cols);
          for (let i = 0; i < values.length; i++) {
            if (!Object.is(got[i], values[i]) && !(got[i] === 0 && values[i] === 0)) {
              assert.fail(`[${rows}, ${cols}] element ${i}: decoded ${got[i]}, reference ${values[i]} (source ${srcValues[i]})`);
            }
          }
          w.free();
          rt.free(src);
          rt.free(out);
        }
      });
    }
  }

  test("q8 and q4 round trips stay within d/2 per element (d at q4's clamp), d the block's scale, + 2⁻¹⁶·d of f32 rounding", () => {
    const rows = 9;
    const cols = 97;
    const raw = randn(rows * cols, 77, 2);
    // Blocks of equal magnitudes of both signs: q4's −m must clamp to 7.
    raw.fill(1.5, 0, 16);
    raw.fill(-1.5, 16, 32);
    const src = rt.tensor("f32", [rows, cols]).set(raw);
    for (const format of ["q8", "q4"] as const) {
      const w = createWeight(rt, { source: src, format });
      const got = dequantizeWeight(rt, { weight: w });
      const dec = got.toFloat32();
      const { quant } = expectedRows(format, raw, rows, cols);
      let clamped = 0;
      for (let r = 0; r < rows; r++) {
        for (let c = 0; c < cols; c++) {
          const d = Math.abs(quant![r]!.scales[Math.floor(c / 32)]!);
          const err = Math.abs(dec[r * cols + c]! - raw[r * cols + c]!);
          const code = quant![r]!.codes[c]!;
          const clamp = format === "q4" && code === 7 && err > d * (0.5 + 2 ** -16);
          if (clamp) clamped++;
          const bound = d * ((clamp ? 1 : 0.5) + 2 ** -16);
          assert.ok(err <= bound, `${format} [${r}, ${c}]: error ${err} > ${bound}`);
        }
      }
      if (format === "q4") assert.ok(clamped >= 16, `q4: the ±1.5 block clamps 16 values, saw ${clamped}`);
      w.free();
      rt.free(got);
    }
    rt.free(src);
  });

  test("round-trip error of Gaussian weights (reported) is within each format's bound", (t) => {
    const rows = 64;
    const cols = 896;
    const raw = randn(rows * cols, 5, 0.02);
    const src = rt.tensor("f32", [rows, cols]).set(raw);
    const bounds: Record<WeightFormat, number> = { f32: 0, bf16: 2 ** -8, q8: 0.012, q4: 0.15 };
    for (const format of WEIGHT_FORMATS) {
      const w = createWeight(rt, { source: src, format });
      const got = dequantizeWeight(rt, { weight: w });
      const err = relRms(got.toFloat32(), raw);
      t.diagnostic(`${format}: relative RMS round-trip error ${err.toExponential(3)}, ${(w.byteLength / (rows * cols)).toFixed(3)} bytes/weight`);
      assert.ok(err <= bounds[format], `${format}: relative RMS error ${err} > ${bounds[format]}`);
      w.free();
      rt.free(got);
    }
    rt.free(src);
  });

  test("sources concatenated along rows pack like one matrix (fused QKV), across row-group boundaries", () => {
    const cols = 80;
    const parts = [5, 2, 9, 4];
    const tensors: Tensor[] = [];
    const all: number[] = [];
    parts.forEach((rows, i) => {
      const v = randn(rows * cols, 100 + i);
      tensors.push(rt.tensor(i % 2 ? "bf16" : "f32", [rows, cols]).set(v));
      all.push(...tensors[i]!.toFloat32());
    });
    const total = parts.reduce((a, b) => a + b, 0);
    const whole = rt.tensor("f32", [total, cols]).set(all);
    for (const format of WEIGHT_FORMATS) {
      const fused = createWeight(rt, { source: tensors, format });
      const single = createWeight(rt, { source: whole, format });
      assert.equal(fused.rows, total);
      assert.deepEqual(dequantizeWeight(rt, { weight: fused }).toFloat32(), dequantizeWeight(rt, { weight: single }).toFloat32());
      fused.free();
      single.free();
    }
  });

  test("padding rows and columns are zero: decoding never shows them, packing the same source twice is identical", () => {
    const src = rt.tensor("f32", [3, 33]).set(randn(99, 9));
    for (const format of WEIGHT_FORMATS) {
      // Dirty the heap first so uninitialized padding would show.
      const junk = rt.heap.alloc(1 << 16);
      new Uint8Array(rt.memory.buffer, junk, 1 << 16).fill(0x5a);
      rt.heap.free(junk);
      const a = createWeight(rt, { source: src, format });
      const b = createWeight(rt, { source: src, format });
      const bytesA = new Uint8Array(rt.memory.buffer, a.ptr, a.byteLength).slice();
      const bytesB = new Uint8Array(rt.memory.buffer, b.ptr, b.byteLength);
      assert.deepEqual(bytesA, bytesB.slice(), `${format}: packed bytes differ between two packings`);
      a.free();
      b.free();
    }
  });

  test("the tile layout is the documented one (layout.ts): 8-row tiles of two 4-row halves, rows interleaved, scales after the codes", () => {
    // Row r, column c holds (r + 1) · (c − 16) / 16; 11 rows fill one group and part of a second.
    const rows = 11;
    const cols = 40;
    const values = Array.from({ length: rows * cols }, (_, i) => ((Math.floor(i / cols) + 1) * ((i % cols) - 16)) / 16);
    const src = rt.tensor("f32", [rows, cols]).set(values);
    const at = (r: number, c: number) => values[r * cols + c]!;
    for (const format of WEIGHT_FORMATS) {
      const w = createWeight(rt, { source: src, format });
      assert.equal(w.groups, 2);
      assert.equal(w.blocks, 2);
      const tileBytes = WEIGHT_TILE_BYTES[format];
      // Half 1's offset: f32/bf16 interleave the halves per column (pair), q8/q4 split the tile.
      const half = format === "q8" ? 144 : format === "q4" ? 80 : 16;
      assert.equal(w.byteLength, 2 * 2 * tileBytes);
      const bytes = new DataView(rt.memory.buffer, w.ptr, w.byteLength);
      for (let row = 0; row < 16; row++) {
        const g = Math.floor(row / 8);
        const r = row % 4;
        for (let b = 0; b < 2; b++) {
          const t = (g * 2 + b) * tileBytes + (Math.floor(row / 4) % 2) * half;
          for (let k = 0; k < 32; k++) {
            const c = b * 32 + k;
            const real = row < rows && c < cols;
            const v = real ? at(row, c) : 0;
            const where = `${format} row ${row}, column ${c}`;
            if (format === "f32") assert.equal(bytes.getFloat32(t + 32 * k + 4 * r, true), v, where);
            else if (format === "bf16") assert.equal(bytes.getUint16(t + 32 * (k >> 1) + 4 * r + 2 * (k & 1), true), encodeValue("bf16", v), where);
            else if (format === "q8") {
              const d = bytes.getFloat32(t + 128 + 4 * r, true);
              const q = bytes.getInt8(t + 8 * (k >> 1) + 2 * r + (k & 1));
              let amax = 0;
              for (let cc = b * 32; cc < Math.min(cols, b * 32 + 32); cc++) amax = Math.max(amax, row < rows ? Math.abs(at(row, cc)) : 0);
              assert.equal(d, Math.fround(amax / 127), `${where}: scale`);
              if (!real) assert.equal(q, 0, `${where}: padding`);
              else assert.ok(Math.abs(q * d - v) <= d * (0.5 + 2 ** -16), `${where}: code ${q} for ${v}`);
            } else {
              const d = bytes.getFloat32(t + 64 + 4 * r, true);
              const j = k >> 1;
              const halfword = bytes.getUint16(t + 16 * (j >> 2) + 4 * r + 2 * (k & 1), true);
              const q = (((halfword >> (4 * (j & 3))) & 15) << 28) >> 28;
              if (!real) assert.equal(q, 0, `${where}: padding`);
              else assert.ok(Math.abs(q * d - v) <= Math.abs(d) * (0.5 + 2 ** -16), `${where}: code ${q} for ${v}`);
            }
          }
        }
      }
      w.free();
    }
    rt.free(src);
  });

  test("bad arguments are refused by name", () => {
    const src = rt.tensor("f32", [4, 8]);
    const i8 = rt.tensor("int8", [4, 8]);
    const vec = rt.tensor("f32", [8]);
    const other = rt.tensor("f32", [4, 9]);
    const check = (fn: () => unknown, argument: string, text: RegExp) =>
      assert.throws(fn, (e: unknown) => e instanceof ArgumentError && e.argument === argument && text.test(e.message));
    check(() => createWeight(rt, { source: src, format: "q5" as WeightFormat }), "format", /"q4".*got "q5"/);
    check(() => createWeight(rt, { source: i8, format: "q8" }), "source.dtype", /f32 \| f16 \| bf16, got "int8"/);
    check(() => createWeight(rt, { source: vec, format: "q8" }), "source.shape", /rank 2/);
    check(() => createWeight(rt, { source: [src, other], format: "f32" }), "source[1].shape[1]", /must be 8 \(cols\), got 9/);
    check(() => createWeight(rt, { source: [], format: "f32" }), "source", /non-empty/);
    const strided = new (src.constructor as typeof Tensor)(rt.memory, src.ptr, "f32", [2, 8], [16, 1]);
    check(() => createWeight(rt, { source: strided, format: "f32" }), "source", /contiguous/);
    const w = createWeight(rt, { source: src, format: "q8" });
    w.free();
    check(() => dequantizeWeight(rt, { weight: w }), "weight", /was freed/);
    assert.throws(() => w.free(), /already freed/);
    for (const t of [src, i8, vec, other]) rt.free(t);
  });
});

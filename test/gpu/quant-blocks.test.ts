// The CPU tiles → ggml blocks repack the WebGPU runner uploads
// (src/gpu/quant-blocks.ts), on the CPU alone (no adapter needed): GGUF
// blocks of Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS — raw random bytes
// (every bit of a block set some way, finite f16 super-scales, subnormal
// and near-f16-max ones among them) and quantized random rows — go
// through the CPU loader's repack
// (createGgmlWeight) and back, and come out byte for byte as the file had
// them, for 9 rows (a partial last tile of 4) × 512 columns, whole and from
// row 5 on. kvflash's q4 (Q4_0 codes, f32 scales, 1000 columns: a partial
// block) comes out as q4_0 blocks holding the values the CPU decodes
// (f32(d·q), exactly) (decodeBlockRows, the float64 twin, against dequantizeWeight).
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { GgmlMatrix, type Runtime, type Weight, createGgmlWeight, createRuntime, createWeight, dequantizeWeight } from "../../src/ops-entry.js";
import { blockRowBytes, gpuBlockType, packBlockRows } from "../../src/gpu/quant-blocks.js";
import { GGML_TYPES } from "../../src/tensor/ggml-types.js";
import { quantize } from "../../src/sources/gguf/quantize.js";
import { decodeBlockRows } from "../../src/ops/reference/block-decode.js";
import { assertWithin, randn } from "../helpers/random.js";
import { randomKquantBlocks } from "./block-support.js";

let rt: Runtime;
before(async () => {
  rt = await createRuntime({ threads: 1 });
});
after(async () => {
  await rt.dispose();
});

function tilesOf(w: Weight): Uint8Array {
  return new Uint8Array(rt.of(w.memory).memory.buffer, w.ptr, w.byteLength);
}

for (const type of ["Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_XS"] as const) {
  for (const raw of [true, false]) {
    test(`${type} ${raw ? "raw random blocks" : "quantized rows"} come back from the CPU tiles byte for byte`, () => {
      const [rows, cols] = [9, 512];
      const bytes = raw ? randomKquantBlocks(type, rows, cols, 3, true) : quantize(type, randn(rows * cols, 4, 0.5), cols);
      const src = rt.tensor("uint8", [rows, bytes.length / rows]);
      src.set(bytes);
      const w = createGgmlWeight(rt, { source: new GgmlMatrix(type, src, rows, cols) });
      rt.free(src);
      try {
        const format = w.format;
        const rowBytes = blockRowBytes(gpuBlockType(format)!, cols);
        assert.equal(rowBytes, (cols / 256) * GGML_TYPES[type].typeSize);
        assert.deepEqual(packBlockRows(tilesOf(w), format, w.blocks, 0, rows), bytes);
        assert.deepEqual(packBlockRows(tilesOf(w), format, w.blocks, 5, 4), bytes.subarray(5 * rowBytes));
      } finally {
        w.free();
      }
    });
  }
}

test("q4 (Q4_0 codes, f32 scales; 1000 columns) goes up as q4_0 blocks of the values the CPU decodes", () => {
  const [rows, cols] = [9, 1000];
  const src = rt.tensor("f32", [rows, cols]);
  src.set(randn(rows * cols, 5, 0.3));
  const w = createWeight(rt, { source: src, format: "q4" });
  rt.free(src);
  const cpu = dequantizeWeight(rt, { weight: w });
  try {
    assert.equal(gpuBlockType("q4"), "q4_0");
    const blocks = packBlockRows(tilesOf(w), "q4", w.blocks, 0, rows);
    assert.equal(blocks.length, rows * blockRowBytes("q4_0", cols));
    const { values } = decodeBlockRows("q4_0", blocks, rows, cols);
    assertWithin(values.map(Math.fround), cpu.data(), () => 0, "q4_0 values"); // f32(d·q), as the CPU decodes (±0 alike)
    const tail = decodeBlockRows("q4_0", packBlockRows(tilesOf(w), "q4", w.blocks, 7, 2), 2, cols).values;
    assertWithin(tail.map(Math.fround), cpu.data().subarray(7 * cols), () => 0, "q4_0 values from row 7");
  } finally {
    rt.free(cpu);
    w.free();
  }
});

test("formats without a GPU block type are refused by name", () => {
  for (const f of ["f32", "bf16", "q8"] as const) assert.equal(gpuBlockType(f), null);
  assert.throws(() => packBlockRows(new Uint8Array(16), "q8", 1, 0, 1), /format has no GPU block type: q8/);
});

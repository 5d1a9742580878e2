// The one ggml type table (src/tensor/ggml-types.ts) against ggml itself, and every copy that
// derives from it or, in AssemblyScript, repeats it. The expected values are written here as
// literals from ggml: the type ids of ggml.h's `enum ggml_type`, the block constants of
// ggml-common.h (QK4_0 = QK8_0 = QK4_NL = 32, QK_K = 256, K_SCALE_SIZE = 12,
// sizeof(ggml_half) = 2) and its static_asserts on every block's size, e.g.
// `static_assert(sizeof(block_q4_K) == 2*sizeof(ggml_half) + K_SCALE_SIZE + QK_K/2)`.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { GGML_NATIVE, isGgmlNativeType } from "../../src/ops-entry.js";
import { GPU_BLOCK } from "../../src/gpu/wgsl/quant-blocks.js";
import { GGML_TYPES, GGML_TYPE_BY_ID, GGML_UNSUPPORTED_NAMES, type GgmlTypeName, QK_K, ggmlRowBytes } from "../../src/tensor/ggml-types.js";
import { repoRoot } from "../helpers/import-graph.js";

const HALF = 2; // sizeof(ggml_half)
const K_SCALE_SIZE = 12;
const QK = 32; // QK4_0, QK4_1, QK5_0, QK5_1, QK8_0, QK4_NL

/** ggml's id, values per block and bytes per block (ggml-common.h's static_asserts, term by term). */
const GGML: Record<GgmlTypeName, [id: number, values: number, bytes: number]> = {
  F32: [0, 1, 4],
  F16: [1, 1, 2],
  Q4_0: [2, QK, HALF + QK / 2], // 18
  Q4_1: [3, QK, 2 * HALF + QK / 2], // 20
  Q5_0: [6, QK, HALF + 4 + QK / 2], // 22
  Q5_1: [7, QK, 2 * HALF + 4 + QK / 2], // 24
  Q8_0: [8, QK, HALF + QK], // 34
  Q2_K: [10, 256, 2 * HALF + 256 / 16 + 256 / 4], // 84
  Q3_K: [11, 256, HALF + 256 / 4 + 256 / 8 + 12], // 110
  Q4_K: [12, 256, 2 * HALF + K_SCALE_SIZE + 256 / 2], // 144
  Q5_K: [13, 256, 2 * HALF + K_SCALE_SIZE + 256 / 2 + 256 / 8], // 176
  Q6_K: [14, 256, HALF + 256 / 16 + 3 * 256 / 4], // 210
  IQ4_NL: [20, QK, HALF + QK / 2], // 18
  IQ4_XS: [23, 256, HALF + 2 + 256 / 64 + 256 / 2], // 136
  BF16: [30, 1, 2],
};

test("every type's id, block size and block bytes are ggml's", () => {
  assert.equal(QK_K, 256);
  assert.deepEqual(Object.keys(GGML_TYPES).sort(), Object.keys(GGML).sort());
  for (const [name, [id, values, bytes]] of Object.entries(GGML) as [GgmlTypeName, [number, number, number]][]) {
    const t = GGML_TYPES[name];
    assert.deepEqual({ name: t.name, id: t.id, blockSize: t.blockSize, typeSize: t.typeSize }, { name, id, blockSize: values, typeSize: bytes }, name);
  }
  // The sizes people quote, spelled out once more: Q4_K 144, Q6_K 210, Q8_0 34, Q4_0 18, Q2_K 84, Q3_K 110, IQ4_XS 136.
  const quoted: [GgmlTypeName, number][] = [["Q4_K", 144], ["Q6_K", 210], ["Q8_0", 34], ["Q4_0", 18], ["Q2_K", 84], ["Q3_K", 110], ["IQ4_XS", 136], ["Q5_K", 176], ["Q5_0", 22]];
  for (const [name, bytes] of quoted) assert.equal(GGML_TYPES[name].typeSize, bytes, name);
});

test("ids are unique, found by id, and never also listed as unsupported", () => {
  assert.equal(GGML_TYPE_BY_ID.size, Object.keys(GGML_TYPES).length);
  for (const t of Object.values(GGML_TYPES)) {
    assert.equal(GGML_TYPE_BY_ID.get(t.id), t);
    assert.equal(GGML_UNSUPPORTED_NAMES[t.id], undefined, `${t.name} (id ${t.id}) is listed as unsupported`);
  }
  assert.equal(ggmlRowBytes(GGML_TYPES.Q6_K, 4096), 16 * 210);
  assert.equal(ggmlRowBytes(GGML_TYPES.Q8_0, 96), 3 * 34);
});

test("GGML_NATIVE (ops) is the table's rows with a CPU format, geometry included", () => {
  const want: Record<string, string> = { Q8_0: "q8", Q5_0: "q5", IQ4_NL: "q8", IQ4_XS: "iq4_xs", Q2_K: "q2_k", Q3_K: "q3_k", Q4_K: "q4_k", Q5_K: "q5_k", Q6_K: "q6_k" };
  assert.deepEqual(Object.fromEntries(Object.entries(GGML_NATIVE).map(([n, v]) => [n, v.format])), want);
  for (const [name, v] of Object.entries(GGML_NATIVE)) {
    const t = GGML_TYPES[name as GgmlTypeName];
    assert.deepEqual({ id: v.id, blockSize: v.blockSize, typeSize: v.typeSize }, { id: t.id, blockSize: t.blockSize, typeSize: t.typeSize }, name);
  }
  for (const name of ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_1", "Q8_1"]) assert.equal(isGgmlNativeType(name), false, name);
});

test("the GPU's block geometry is ggml's (q4_0 with its scale widened to f32: 20 bytes)", () => {
  assert.deepEqual(GPU_BLOCK, {
    q4_0: { values: 32, bytes: 20 },
    q4_k: { values: 256, bytes: 144 },
    q5_k: { values: 256, bytes: 176 },
    q6_k: { values: 256, bytes: 210 },
    q2_k: { values: 256, bytes: 84 },
    q3_k: { values: 256, bytes: 110 },
    iq4_xs: { values: 256, bytes: 136 },
  });
});

test("the AssemblyScript packer's block sizes and ids (assembly/linalg/ggml-pack.ts) are the table's", () => {
  const text = readFileSync(join(repoRoot(import.meta.url), "assembly/linalg/ggml-pack.ts"), "utf8");
  const consts = new Map([...text.matchAll(/^const (\w+): i32 = (\d+);/gm)].map((m) => [m[1]!, Number(m[2])]));
  const natives = Object.keys(GGML_NATIVE) as GgmlTypeName[];
  for (const name of natives) {
    assert.equal(consts.get(`${name}_BYTES`), GGML_TYPES[name].typeSize, `${name}_BYTES`);
    assert.equal(consts.get(`GGML_${name}`), GGML_TYPES[name].id, `GGML_${name}`);
  }
  assert.equal([...consts.keys()].filter((k) => k.endsWith("_BYTES")).length, natives.length, "a block size in ggml-pack.ts the table does not check");
});

// kquantModelSource (src/model/gguf/kquant-source.ts): whether a model keeps
// K-quant matrices natively, asked before its runtime starts so that the
// default kernel flavor can weigh it (RuntimeOptions.kquantWeights).
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { kquantModelSource } from "../../src/model/gguf/kquant-source.js";
import { quantize } from "../../src/sources/gguf/quantize.js";
import { gguf, writeGguf } from "../../src/sources/gguf/writer.js";

const root = mkdtempSync(join(tmpdir(), "kvflash-kquant-source-"));
after(() => rmSync(root, { recursive: true, force: true }));

const values = (n: number) => Float32Array.from({ length: n }, (_, i) => Math.sin(i));
/** A GGUF file of one [2, 256] matrix per type (F32: a [256] vector, as a norm) — bytes: F32 1024, Q8_0 544, Q6_K 420, Q4_K 288, IQ4_XS 272. */
function ggufWith(name: string, types: ("F32" | "Q8_0" | "Q4_K" | "Q6_K" | "IQ4_XS")[]): string {
  const path = join(root, name);
  writeGguf(path, {
    metadata: { "general.architecture": gguf.str("llama") },
    tensors: types.map((type, i) => (type === "F32" ? { name: `t${i}`, type, shape: [256], data: quantize(type, values(256), 256) } : { name: `t${i}`, type, shape: [2, 256], data: quantize(type, values(512), 256) })),
  });
  return path;
}

test("a GGUF file whose K-quant tensors hold most of its bytes keeps them natively under weights auto (the default), not under a converting format", () => {
  for (const types of [["F32", "Q4_K", "Q4_K", "Q6_K", "Q6_K"], ["Q6_K", "Q6_K", "Q8_0"], ["IQ4_XS"]] as const) {
    const path = ggufWith(`${types.join("-")}.gguf`, [...types]);
    assert.equal(kquantModelSource({ kind: "gguf", path }, undefined), true, types.join(", "));
    assert.equal(kquantModelSource({ kind: "gguf", path }, "auto"), true, types.join(", "));
    for (const weights of ["q8", "q4", "bf16", "f32"]) assert.equal(kquantModelSource({ kind: "gguf", path }, weights), false, `${types.join(", ")} as ${weights}`);
  }
});

test("a GGUF file without K-quants or with them under half its bytes, a safetensors directory and an unreadable file answer false (the loader names a bad file)", () => {
  assert.equal(kquantModelSource({ kind: "gguf", path: ggufWith("q8.gguf", ["F32", "Q8_0"]) }, undefined), false);
  // Q6_K 420 of 964 bytes: mostly Q8_0, as Qwen2.5-0.5B's Q4_K_M file is mostly Q5_0 and Q8_0.
  assert.equal(kquantModelSource({ kind: "gguf", path: ggufWith("q8-q6k.gguf", ["Q8_0", "Q6_K"]) }, undefined), false);
  assert.equal(kquantModelSource({ kind: "dir", path: root }, undefined), false);
  assert.equal(kquantModelSource({ kind: "gguf", path: join(root, "missing.gguf") }, undefined), false);
  const junk = join(root, "junk.gguf");
  writeFileSync(junk, "not a gguf file");
  assert.equal(kquantModelSource({ kind: "gguf", path: junk }, undefined), false);
});

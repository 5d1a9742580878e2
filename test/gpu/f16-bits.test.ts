// f16 → f32 by the bits in WGSL (src/gpu/wgsl/f16-bits.ts), against the
// float64 reference decode (tensor/minifloat.ts) for all 65536 codes, bit for
// bit: zeros of both signs, subnormals (which unpack2x16float may flush),
// normals, ±inf and every NaN payload. The pair form against the same.
// Runs on the adapter support.ts opens (SwiftShader in CI).
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import type { GpuDevice } from "../../src/gpu/index.js";
import { f16PairToF32, f16ToF32 } from "../../src/gpu/wgsl/f16-bits.js";
import { F16, decodeMiniFloat } from "../../src/tensor/minifloat.js";
import { openTestGpu } from "./support.js";

const opened = await openTestGpu({ everyPass: true });
const gpuTest = (name: string, fn: (gpu: GpuDevice) => Promise<void>) => test(name, { skip: opened.skip }, () => fn(opened.gpu!));

/** The f32 bits the reference gives code c (NaN: sign, all-ones exponent, the payload shifted up, as the expression keeps it). */
function referenceBits(c: number): number {
  const v = decodeMiniFloat(F16, c);
  if (Number.isNaN(v)) return (((c & 0x8000) << 16) | 0x7f800000 | ((c & 0x3ff) << 13)) >>> 0;
  const f = new Float32Array([v]);
  return new Uint32Array(f.buffer)[0]!;
}

async function decodeAll(gpu: GpuDevice, body: string, words: Uint32Array, outWords: number): Promise<Uint32Array> {
  const code = `@group(0) @binding(0) var<storage, read> codes: array<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let i = g.x + g.y * 65535u * 64u;
  if (i >= arrayLength(&codes)) { return; }
  let w = codes[i];
${body}
}`;
  const pipeline = await gpu.pipeline(code, "f16 bits test");
  const src = gpu.upload(new Uint8Array(words.buffer), "codes");
  const dst = gpu.pool.acquire(outWords * 4, "out");
  await gpu.scoped("decoding f16 codes", async () => {
    const enc = gpu.device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, gpu.device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: src } }, { binding: 1, resource: { buffer: dst } }] }));
    pass.dispatchWorkgroups(Math.ceil(words.length / 64));
    pass.end();
    gpu.device.queue.submit([enc.finish()]);
    await gpu.device.queue.onSubmittedWorkDone();
  });
  const got = new Uint32Array(await gpu.read(dst, outWords * 4));
  gpu.pool.release(src);
  gpu.pool.release(dst);
  return got;
}

describe("f16 → f32 by the bits", () => {
  after(() => opened.gpu?.destroy());

  gpuTest("all 65536 codes decode to the reference's f32 bits (subnormals kept, ±0, ±inf, NaN payloads)", async (gpu) => {
    const codes = Uint32Array.from({ length: 65536 }, (_, i) => i);
    const got = await decodeAll(gpu, `  out[i] = bitcast<u32>(${f16ToF32("w")});`, codes, 65536);
    let bad = 0;
    for (let c = 0; c < 65536; c++) if (got[c] !== referenceBits(c) && bad++ < 5) assert.fail(`code 0x${c.toString(16)}: got 0x${got[c]!.toString(16)}, reference 0x${referenceBits(c).toString(16)}`);
    assert.equal(bad, 0);
  });

  gpuTest("the pair form takes the low half first, for words holding every code in each half", async (gpu) => {
    const words = Uint32Array.from({ length: 65536 }, (_, i) => ((i | (((i * 40503) & 0xffff) << 16)) >>> 0));
    const got = await decodeAll(gpu, `  let p = ${f16PairToF32("w")};\n  out[2u * i] = bitcast<u32>(p.x);\n  out[2u * i + 1u] = bitcast<u32>(p.y);`, words, 2 * 65536);
    for (let i = 0; i < 65536; i++) {
      assert.equal(got[2 * i], referenceBits(words[i]! & 0xffff), `low half of word ${i}`);
      assert.equal(got[2 * i + 1], referenceBits(words[i]! >>> 16), `high half of word ${i}`);
    }
  });
});

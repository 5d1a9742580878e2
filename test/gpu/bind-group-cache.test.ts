// The bind-group cache (src/gpu/bind-group-cache.ts): a dispatch's uniform
// parameters and buffers give back the same bind group while they repeat,
// different parameters or buffers give another, the uniform holds the
// parameters it was made with (a dispatch through a hit computes the right
// values), and endStep() evicts only entries not used since the previous step
// once over capacity. Runs on the adapter support.ts opens (SwiftShader in CI).
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { BindGroupCache } from "../../src/gpu/bind-group-cache.js";
import type { GpuDevice } from "../../src/gpu/index.js";
import { openTestGpu } from "./support.js";

const opened = await openTestGpu({ everyPass: true });
const gpuTest = (name: string, fn: (gpu: GpuDevice) => Promise<void>) => test(name, { skip: opened.skip }, () => fn(opened.gpu!));

// out[i] = a[i] · P.scale + P.shift, for i < P.n
const AFFINE = `struct Params { n: u32, scale: f32, shift: f32, pad: u32 }
@group(0) @binding(0) var<uniform> P: Params;
@group(0) @binding(1) var<storage, read> a: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  if (g.x < P.n) { out[g.x] = a[g.x] * P.scale + P.shift; }
}`;

function params(n: number, scale: number, shift: number): ArrayBuffer {
  const p = new ArrayBuffer(16);
  new Uint32Array(p)[0] = n;
  new Float32Array(p).set([scale, shift], 1);
  return p;
}

describe("BindGroupCache", () => {
  after(() => opened.gpu?.destroy());

  gpuTest("the same pipeline, parameters and buffers give the same bind group; any change gives another, computing with its own parameters", async (gpu) => {
    const cache = new BindGroupCache(gpu.device);
    const pipeline = await gpu.pipeline(AFFINE, "affine");
    const a = gpu.upload(new Uint8Array(Float32Array.from([1, 2, 3, 4]).buffer), "a");
    const out = gpu.pool.acquire(16, "out");
    const other = gpu.pool.acquire(16, "other out");
    const g1 = cache.get(pipeline, params(4, 2, 1), [[1, a], [2, out]], "t");
    assert.equal(cache.get(pipeline, params(4, 2, 1), [[1, a], [2, out]], "t"), g1, "a repeat is a hit");
    const g2 = cache.get(pipeline, params(4, 3, 0), [[1, a], [2, out]], "t");
    const g3 = cache.get(pipeline, params(4, 2, 1), [[1, a], [2, other]], "t");
    assert.notEqual(g2, g1);
    assert.notEqual(g3, g1);
    assert.deepEqual(cache.stats, { held: 3, created: 3 });
    const run = async (group: GPUBindGroup, dst: GPUBuffer): Promise<number[]> => {
      const enc = gpu.device.createCommandEncoder();
      const pass = enc.beginComputePass();
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, group);
      pass.dispatchWorkgroups(1);
      pass.end();
      gpu.device.queue.submit([enc.finish()]);
      return [...new Float32Array(await gpu.read(dst, 16))];
    };
    assert.deepEqual(await run(cache.get(pipeline, params(4, 2, 1), [[1, a], [2, out]], "t"), out), [3, 5, 7, 9]);
    assert.deepEqual(await run(cache.get(pipeline, params(4, 3, 0), [[1, a], [2, out]], "t"), out), [3, 6, 9, 12]);
    assert.deepEqual(await run(g1, out), [3, 5, 7, 9], "a hit's uniform still holds its own parameters");
    cache.clear();
    for (const b of [a, out, other]) gpu.pool.release(b);
  });

  gpuTest("endStep keeps what the last step used and evicts the stale entries once over capacity (4096)", async (gpu) => {
    const cache = new BindGroupCache(gpu.device);
    const pipeline = await gpu.pipeline(AFFINE, "affine");
    const a = gpu.upload(new Uint8Array(16), "a");
    const out = gpu.pool.acquire(16, "out");
    const get = (i: number) => cache.get(pipeline, params(4, i, 0), [[1, a], [2, out]], "t");
    for (let i = 0; i < 4000; i++) get(i);
    cache.endStep();
    assert.equal(cache.stats.held, 4000, "under capacity nothing is evicted");
    const kept = get(0); // used in the new step
    for (let i = 4000; i < 4200; i++) get(i);
    cache.endStep();
    assert.equal(cache.stats.held, 201, "over capacity, only what the step used stays (entry 0 and the 200 new ones)");
    assert.equal(get(0), kept);
    assert.equal(cache.stats.created, 4200);
    get(1);
    assert.equal(cache.stats.created, 4201, "an evicted entry is made anew");
    cache.clear();
    assert.equal(cache.stats.held, 0);
    gpu.pool.release(a);
    gpu.pool.release(out);
  });
});

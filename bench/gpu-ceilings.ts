/**
 * The GPU's ceilings, measured in the same run as the kernels they judge
 * (as bench/ceilings.ts does for the CPU): memory bandwidth from a copy
 * kernel (vec4 read + write; bytes = read + written) and FMA throughput from
 * a kernel of independent vec4 fma chains (flops = 2 per lane per fma).
 * Benchmark code only: nothing in src/ reaches it.
 */
import type { GpuDevice } from "../src/gpu/device.js";

export interface GpuCeilings {
  copy_gbps: number;
  fma_gflops: number;
}

const COPY_WGSL = `@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4<f32>>;
@compute @workgroup_size(256) fn main(@builtin(global_invocation_id) g: vec3<u32>, @builtin(num_workgroups) n: vec3<u32>) {
  let i = g.x + g.y * n.x * 256u;
  if (i < arrayLength(&dst)) { dst[i] = src[i]; }
}`;

/**
 * ITERS rounds of 4 independent vec4 fma chains per invocation. The
 * multiplier and addend are read from a buffer at run time: with them as
 * WGSL constants, NVIDIA's compiler shortened the chains (an H100 "measured"
 * 234 TFLOP/s, 3.5× its f32 FMA peak, 2026-11-27).
 */
const FMA_ITERS = 512;
const FMA_WGSL = `@group(0) @binding(0) var<storage, read_write> out: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read> coef: array<vec4<f32>, 2>;
@compute @workgroup_size(256) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  let x = vec4<f32>(f32(g.x) * 1e-7, 0.5, 0.25, 0.125);
  var a = x; var b = x + 1.0; var c = x + 2.0; var d = x + 3.0;
  let m = coef[0];
  let k = coef[1];
  for (var i = 0u; i < ${FMA_ITERS}u; i++) {
    a = fma(a, m, k); b = fma(b, m, k); c = fma(c, m, k); d = fma(d, m, k);
  }
  out[g.x] = a + b + c + d;
}`;

/**
 * Median ms per repetition of what `encode` records: n repetitions in one
 * submission, timed to onSubmittedWorkDone, `rounds` times after one warm-up
 * submission of `perSubmit`. n is at least `perSubmit` and enough for about
 * 2 ms of GPU work (at most 500): a submission's fixed cost through Dawn's
 * Node binding (submit, then the wait's resolution) is tens to hundreds of
 * microseconds, which would otherwise set a floor under a small kernel's time.
 */
export async function timeGpu(gpu: GpuDevice, encode: (pass: GPUComputePassEncoder) => void, perSubmit: number, rounds: number): Promise<number> {
  const once = async (n: number) => {
    const enc = gpu.device.createCommandEncoder();
    const pass = enc.beginComputePass();
    for (let i = 0; i < n; i++) encode(pass);
    pass.end();
    const t0 = performance.now();
    gpu.device.queue.submit([enc.finish()]);
    await gpu.device.queue.onSubmittedWorkDone();
    return (performance.now() - t0) / n;
  };
  const warm = await gpu.scoped("warming up a benchmark", () => once(perSubmit));
  const n = Math.min(500, Math.max(perSubmit, Math.ceil(2 / Math.max(warm, 1e-3))));
  const times: number[] = [];
  for (let r = 0; r < rounds; r++) times.push(await once(n));
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)]!;
}

export async function measureGpuCeilings(gpu: GpuDevice, quick: boolean): Promise<GpuCeilings> {
  const d = gpu.device;
  const floats = (quick ? 4 : 64) << 20;
  const bytes = Math.min(floats * 4, gpu.limits.maxStorageBufferBindingSize);
  const src = gpu.pool.acquire(bytes, "copy src");
  const dst = gpu.pool.acquire(bytes, "copy dst");
  const fmaGroups = quick ? 64 : 4096;
  const fmaOut = gpu.pool.acquire(fmaGroups * 256 * 16, "fma out");
  const coef = gpu.upload(new Uint8Array(new Float32Array([0.9999, 0.9999, 0.9999, 0.9999, 1e-4, 1e-4, 1e-4, 1e-4]).buffer), "fma coefficients");
  try {
    const copy = await gpu.pipeline(COPY_WGSL, "copy ceiling");
    const fma = await gpu.pipeline(FMA_WGSL, "fma ceiling");
    const copyGroup = d.createBindGroup({ layout: copy.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: src, size: bytes } }, { binding: 1, resource: { buffer: dst, size: bytes } }] });
    const fmaGroup = d.createBindGroup({ layout: fma.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: fmaOut } }, { binding: 1, resource: { buffer: coef, size: 32 } }] });
    const groups = Math.ceil(bytes / 16 / 256);
    const gx = Math.min(groups, gpu.limits.maxComputeWorkgroupsPerDimension);
    const copyMs = await timeGpu(gpu, (pass) => {
      pass.setPipeline(copy);
      pass.setBindGroup(0, copyGroup);
      pass.dispatchWorkgroups(gx, Math.ceil(groups / gx));
    }, quick ? 1 : 10, quick ? 3 : 7);
    const fmaMs = await timeGpu(gpu, (pass) => {
      pass.setPipeline(fma);
      pass.setBindGroup(0, fmaGroup);
      pass.dispatchWorkgroups(fmaGroups);
    }, quick ? 1 : 10, quick ? 3 : 7);
    const flops = fmaGroups * 256 * FMA_ITERS * 4 * 4 * 2;
    return { copy_gbps: (2 * bytes) / (copyMs * 1e6), fma_gflops: flops / (fmaMs * 1e6) };
  } finally {
    for (const b of [src, dst, fmaOut, coef]) gpu.pool.release(b);
  }
}

/** The adapter as rows name it: its device ("nvidia-h100-80gb-hbm3"), else its architecture (Dawn leaves NVIDIA's empty). */
export function adapterName(gpu: GpuDevice): string {
  return gpu.adapter.device || gpu.adapter.architecture;
}

// Shared helpers of the WebGPU suites: the device they run on, and the
// comparison against the float64 references with the GPU tolerances.
//
// The device: SwiftShader (Debian chromium's CPU Vulkan driver) when no
// VK_ICD_FILENAMES is set and its manifest exists, else whatever adapter the
// machine has. Without an adapter the suites skip with the reason printed —
// unless KVFLASH_REQUIRE_WEBGPU=1 (CI sets it: .ci/run installs chromium and
// the Vulkan loader), which turns the skip into a failure.
//
// KVFLASH_WEBGPU_SUITES=smoke runs only the device-layer files (device,
// bind-group cache, f16 bits: they open with { everyPass: true }) and skips
// the rest, each test declared with the reason. CI sets it on its Node 20
// pass and runs every suite on Node 24: the kernels are WGSL compiled by Dawn,
// the same whichever Node or wasm kernel flavor runs the test, so a second
// full run repeated the first (about 4 minutes on SwiftShader); the smoke
// files keep the Node binding itself (dawn.node, loaded by each Node) checked
// on both. Unset or "all": every suite runs.
//
// Tolerances (WGSL exp/log carry a few ULP more error than wasm's, and the
// kernels sum in another order than the reference):
//   out: per query row, max_d |o − ref| / max_d |ref| ≤ 2e-5; a row whose
//        reference is all zero (no kept key) must be exactly 0.
//   lse: |lse − ref| / max(1, |ref|) ≤ 2e-5; −Infinity must match exactly.
import { existsSync } from "node:fs";
import { GpuDevice, SWIFTSHADER_ICD, WebGpuUnavailableError } from "../../src/gpu/index.js";
import type { GpuDecoderOps } from "../../src/gpu/decoder-ops.js";
import { assertClose } from "../attention/support.js";

export const GPU_OUT_TOL = 2e-5;
export const GPU_LSE_TOL = 2e-5;

/** Which suites run, from $KVFLASH_WEBGPU_SUITES (see the header). */
function suitesToRun(): "all" | "smoke" {
  const v = process.env["KVFLASH_WEBGPU_SUITES"];
  if (v === undefined || v === "" || v === "all") return "all";
  if (v === "smoke") return "smoke";
  throw new Error(`KVFLASH_WEBGPU_SUITES must be "all" or "smoke", got ${JSON.stringify(v)}`);
}

/**
 * The test device, or the reason the suites skip. `everyPass`: a device-layer
 * file, run under KVFLASH_WEBGPU_SUITES=smoke too.
 */
export async function openTestGpu(options: { everyPass?: boolean } = {}): Promise<{ gpu: GpuDevice; skip: false } | { gpu: null; skip: string }> {
  if (suitesToRun() === "smoke" && options.everyPass !== true) {
    return { gpu: null, skip: "KVFLASH_WEBGPU_SUITES=smoke: the WebGPU kernel and runner suites run on CI's Node 24 pass (WGSL on Dawn: the same on either Node)" };
  }
  if (process.env["VK_ICD_FILENAMES"] === undefined && existsSync(SWIFTSHADER_ICD)) process.env["VK_ICD_FILENAMES"] = SWIFTSHADER_ICD;
  try {
    const gpu = await GpuDevice.open({ device: "webgpu" });
    if (gpu === null) throw new WebGpuUnavailableError("no adapter");
    return { gpu, skip: false };
  } catch (e) {
    if (!(e instanceof WebGpuUnavailableError)) throw e;
    if (process.env["KVFLASH_REQUIRE_WEBGPU"] === "1") throw new Error(`KVFLASH_REQUIRE_WEBGPU=1, but: ${e.message}`);
    const why = `no WebGPU adapter (${e.message.slice(0, 160)}…); set KVFLASH_REQUIRE_WEBGPU=1 to fail instead`;
    process.stderr.write(`# skipping the WebGPU suites: ${why}\n`);
    return { gpu: null, skip: why };
  }
}

/** out (rows of D) and lse against the reference, with the GPU tolerances. */
export function assertGpuClose(what: string, got: { out: ArrayLike<number>; lse?: ArrayLike<number> }, ref: { out: ArrayLike<number>; lse: ArrayLike<number> }, D: number): void {
  assertClose(what, got, ref, D, { out: GPU_OUT_TOL, lse: GPU_LSE_TOL });
}

/** Records one compute pass (`record`), submits it in an error scope named `label`, waits, recycles `ops`' step buffers, and reads back `n` f32 values of `out`. */
export async function runPass(gpu: GpuDevice, ops: GpuDecoderOps, label: string, record: (pass: GPUComputePassEncoder) => void, out: GPUBuffer, n: number): Promise<Float32Array> {
  await gpu.scoped(label, async () => {
    const enc = gpu.device.createCommandEncoder();
    const pass = enc.beginComputePass();
    record(pass);
    pass.end();
    gpu.device.queue.submit([enc.finish()]);
    await gpu.device.queue.onSubmittedWorkDone();
  });
  ops.recycle();
  return new Float32Array(await gpu.read(out, n * 4));
}

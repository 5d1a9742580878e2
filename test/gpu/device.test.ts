// The WebGPU device layer (src/gpu/): adapter choice and description, limits,
// the pipeline cache, the buffer pool, error scopes as GpuError, device loss.
// Runs on the adapter support.ts opens (SwiftShader in CI).
import assert from "node:assert/strict";
import { after, describe, test } from "node:test";
import { ArgumentError } from "../../src/ops-entry.js";
import { GpuDevice, GpuError, describeAdapter, formatAdapter, parseDeviceKind } from "../../src/gpu/index.js";
import { sizeClass } from "../../src/gpu/buffer-pool.js";
import { chooseTile, tileBytes } from "../../src/gpu/wgsl/flash-attention.js";
import { openTestGpu } from "./support.js";

const opened = await openTestGpu({ everyPass: true });
const gpuTest = (name: string, fn: (gpu: GpuDevice) => Promise<void>) => test(name, { skip: opened.skip }, () => fn(opened.gpu!));

const COPY = `@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read_write> b: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) {
  if (g.x < arrayLength(&b)) { b[g.x] = 2.0 * a[g.x]; }
}`;

describe("device kinds and tiles (no adapter needed)", () => {
  test("--device takes cpu, webgpu or auto and names the flag and the value otherwise", () => {
    assert.equal(parseDeviceKind("auto"), "auto");
    assert.throws(() => parseDeviceKind("cuda"), (e: Error) => e instanceof ArgumentError && e.message === '--device must be one of cpu | webgpu | auto, got "cuda"');
  });

  test("the startup line names an adapter whose architecture is empty by its device (what Dawn reported for an H100, 2026-11-27)", () => {
    const info = { vendor: "nvidia", architecture: "", device: "nvidia-h100-80gb-hbm3", description: "NVIDIA: 580.159.04 580.159.4.0", isFallbackAdapter: false };
    const d = describeAdapter({ info } as unknown as GPUAdapter);
    assert.equal(d.software, false);
    assert.equal(formatAdapter(d), "webgpu: nvidia nvidia-h100-80gb-hbm3 (NVIDIA: 580.159.04 580.159.4.0)");
    const swift = describeAdapter({ info: { vendor: "google", architecture: "swiftshader", device: "swiftshader-device-subzero-", description: "SwiftShader driver 5.0.0", isFallbackAdapter: true } } as unknown as GPUAdapter);
    assert.equal(formatAdapter(swift), "webgpu: google swiftshader swiftshader-device-subzero- (SwiftShader driver 5.0.0), a software adapter: correct, not GPU speed");
  });

  test("buffer size classes are powers of two from 256 bytes", () => {
    assert.deepEqual([1, 256, 257, 4096, 5000].map(sizeClass), [256, 256, 512, 4096, 8192]);
  });

  test("the attention tile shrinks to fit the workgroup memory the adapter has", () => {
    assert.deepEqual(chooseTile(128, 49152), { BR: 64, BC: 64 }); // NVIDIA, AMD: 48 KiB
    assert.deepEqual(chooseTile(256, 32768), { BR: 32, BC: 64 }); // SwiftShader: 32 KiB
    assert.equal(tileBytes({ BR: 64, BC: 64 }), 38912);
    const t = chooseTile(256, 16384);
    assert.deepEqual(t, { BR: 32, BC: 32 });
    assert.ok(tileBytes(t, 256) <= 16384, `${JSON.stringify(t)} fits 16 KiB`);
    assert.throws(() => chooseTile(128, 4096), /workgroup memory/);
  });
});

describe("GpuDevice on the test adapter", () => {
  after(() => opened.gpu?.destroy());

  gpuTest("describes the adapter (vendor, architecture, driver) and flags a software one", async (gpu) => {
    const line = gpu.describe();
    assert.match(line, /^webgpu: /);
    assert.ok(line.includes(gpu.adapter.driver), line);
    if (/swiftshader/i.test(line)) {
      assert.equal(gpu.adapter.software, true);
      assert.match(line, /a software adapter: correct, not GPU speed/);
    }
    assert.ok(gpu.limits.maxStorageBufferBindingSize >= 128 << 20, "limits come from the adapter");
    assert.ok(gpu.limits.maxComputeWorkgroupStorageSize >= 16384);
  });

  gpuTest("auto never picks a software adapter", async (gpu) => {
    const auto = await GpuDevice.open({ device: "auto" });
    if (gpu.adapter.software) assert.equal(auto, null);
    else assert.ok(auto !== null && !auto.adapter.software);
    auto?.destroy();
  });

  gpuTest("a pipeline compiles once per source; pooled buffers are reused; a round trip computes", async (gpu) => {
    const before = gpu.pipelineCount;
    const p1 = await gpu.pipeline(COPY, "double");
    const p2 = await gpu.pipeline(COPY, "double");
    assert.equal(p1, p2);
    assert.equal(gpu.pipelineCount, before + 1);
    const x = Float32Array.from({ length: 100 }, (_, i) => i - 50.5);
    const a = gpu.upload(new Uint8Array(x.buffer), "a");
    const b = gpu.pool.acquire(400, "b");
    await gpu.scoped("doubling", () => {
      const enc = gpu.device.createCommandEncoder();
      const pass = enc.beginComputePass();
      pass.setPipeline(p1);
      pass.setBindGroup(0, gpu.device.createBindGroup({ layout: p1.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: a, size: 400 } }, { binding: 1, resource: { buffer: b, size: 400 } }] }));
      pass.dispatchWorkgroups(2);
      pass.end();
      gpu.device.queue.submit([enc.finish()]);
    });
    const y = new Float32Array(await gpu.read(b, 400));
    assert.deepEqual(Array.from(y), Array.from(x, (v) => 2 * v));
    const created = gpu.pool.stats.created;
    gpu.pool.release(a);
    gpu.pool.release(b);
    const again = gpu.pool.acquire(300, "again");
    assert.equal(gpu.pool.stats.created, created, "a released buffer of the size class is reused");
    gpu.pool.release(again);
  });

  gpuTest("requests for one source while it compiles share its compilation", async (gpu) => {
    const before = gpu.pipelineCount;
    const source = COPY.replace("2.0", "3.0");
    assert.notEqual(source, COPY);
    const [p1, p2, p3] = await Promise.all([gpu.pipeline(source, "triple"), gpu.pipeline(source, "triple"), gpu.pipeline(source, "triple again")]);
    assert.equal(p1, p2);
    assert.equal(p1, p3);
    assert.equal(gpu.pipelineCount, before + 1);
  });

  gpuTest("WGSL that does not compile is a GpuError naming the kernel and the line, and is not cached", async (gpu) => {
    const before = gpu.pipelineCount;
    await assert.rejects(gpu.pipeline("fn main( {", "broken kernel"), (e: Error) => e instanceof GpuError && /broken kernel/.test(e.message) && /1:\d+/.test(e.message));
    await assert.rejects(gpu.pipeline("fn main( {", "broken again"), (e: Error) => e instanceof GpuError && /broken again/.test(e.message));
    assert.equal(gpu.pipelineCount, before);
  });

  gpuTest("a validation error inside a scope is a GpuError saying what was being done", async (gpu) => {
    await assert.rejects(
      gpu.scoped("binding a too-small buffer", () => {
        const p = gpu.device.createBuffer({ size: 4, usage: 0x80 });
        gpu.device.createBindGroup({ layout: gpu.device.createBindGroupLayout({ entries: [] }), entries: [{ binding: 0, resource: { buffer: p } }] });
      }),
      (e: Error) => e instanceof GpuError && /WebGPU validation error while binding a too-small buffer/.test(e.message),
    );
  });

  gpuTest("scopes that overlap in time keep their own errors: a fault in one is reported by it, under its name, and not by the other", async (gpu) => {
    const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));
    // a: an invalid call, then a wait; b: starts during a's wait, waits longer, makes no call.
    const a = gpu.scoped("the faulty call", async () => {
      gpu.device.createBindGroup({ layout: gpu.device.createBindGroupLayout({ entries: [] }), entries: [{ binding: 0, resource: { buffer: gpu.device.createBuffer({ size: 4, usage: 0x80 }) } }] });
      await pause(30);
      return "a";
    });
    const b = gpu.scoped("the sound call", async () => {
      await pause(80);
      return "b";
    });
    const [ra, rb] = await Promise.allSettled([a, b]);
    assert.equal(rb.status, "fulfilled", `the sound call failed: ${rb.status === "rejected" ? (rb.reason as Error).message : ""}`);
    assert.ok(ra.status === "rejected" && ra.reason instanceof GpuError && /validation error while the faulty call/.test((ra.reason as Error).message), "the faulty call reports its own error");
    gpu.checkAlive();
  });

  gpuTest("a lost device fails every later call with a GpuError, not a hang", async () => {
    const own = (await GpuDevice.open({ device: "webgpu" }))!;
    own.device.destroy(); // lost from outside, as a driver reset would
    await own.device.lost;
    await new Promise((r) => setImmediate(r));
    assert.throws(() => own.checkAlive(), (e: Error) => e instanceof GpuError && /device was lost \(destroyed\)/.test(e.message));
    await assert.rejects(own.pipeline(COPY, "after loss"), GpuError);
    own.destroy();
    assert.throws(() => own.checkAlive(), /destroyed/);
  });
});

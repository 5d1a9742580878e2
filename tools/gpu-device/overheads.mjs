// Host-side costs of the WebGPU calls a forward step makes, per call, on this
// machine's adapter (Dawn through the `webgpu` package): an awaited empty
// popErrorScope, an awaited onSubmittedWorkDone after an empty submit, a
// small mapAsync readback, createBuffer + writeBuffer + destroy of a 64-byte
// uniform, and createBindGroup of 4 buffers. The numbers say where a decode
// step's milliseconds go when the kernels themselves take a few.
//   node tools/gpu-device/overheads.mjs     (SwiftShader: VK_ICD_FILENAMES=…)
import { create, globals } from "webgpu";
Object.assign(globalThis, globals);
const gpu = create([]);
const adapter = await gpu.requestAdapter({ powerPreference: "high-performance" });
const device = await adapter.requestDevice();
const U = GPUBufferUsage;
async function time(label, n, fn) {
  for (let i = 0; i < 3; i++) await fn(i);
  const t0 = performance.now();
  for (let i = 0; i < n; i++) await fn(i);
  const us = ((performance.now() - t0) / n) * 1000;
  console.log(`${label.padEnd(48)} ${us.toFixed(1).padStart(9)} µs`);
  return us;
}
const out = {};
out.adapter = `${adapter.info.vendor} ${adapter.info.device} ${adapter.info.description}`;
console.log(out.adapter);
out.popErrorScope = await time("push + await popErrorScope", 200, async () => { device.pushErrorScope("validation"); await device.popErrorScope(); });
out.workDone = await time("empty submit + await onSubmittedWorkDone", 200, async () => { device.queue.submit([]); await device.queue.onSubmittedWorkDone(); });
const src = device.createBuffer({ size: 4096, usage: U.STORAGE | U.COPY_SRC | U.COPY_DST });
out.mapRead = await time("copy 4 KB + await mapAsync + getMappedRange", 200, async () => {
  const st = device.createBuffer({ size: 4096, usage: U.MAP_READ | U.COPY_DST });
  const enc = device.createCommandEncoder(); enc.copyBufferToBuffer(src, 0, st, 0, 4096); device.queue.submit([enc.finish()]);
  await st.mapAsync(GPUMapMode.READ); st.getMappedRange().slice(0); st.destroy();
});
const data = new Uint32Array(16);
out.uniform = await time("createBuffer(64 B uniform) + writeBuffer + destroy", 2000, async () => { const b = device.createBuffer({ size: 64, usage: U.UNIFORM | U.COPY_DST }); device.queue.writeBuffer(b, 0, data); b.destroy(); });
const mod = device.createShaderModule({ code: `@group(0) @binding(0) var<uniform> p: vec4<u32>; @group(0) @binding(1) var<storage, read> a: array<f32>; @group(0) @binding(2) var<storage, read> b: array<f32>; @group(0) @binding(3) var<storage, read_write> c: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) g: vec3<u32>) { if (g.x < p.x) { c[g.x] = a[g.x] + b[g.x]; } }` });
const pipe = device.createComputePipeline({ layout: "auto", compute: { module: mod, entryPoint: "main" } });
const ub = device.createBuffer({ size: 64, usage: U.UNIFORM | U.COPY_DST });
const bufs = [0, 1, 2].map(() => device.createBuffer({ size: 4096, usage: U.STORAGE }));
const entries = [ub, ...bufs].map((buffer, binding) => ({ binding, resource: { buffer } }));
out.bindGroup = await time("createBindGroup (uniform + 3 storage)", 2000, async () => { device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries }); });
out.record300 = await time("record 300 dispatches (bind group each) + submit", 20, async () => {
  const enc = device.createCommandEncoder(); const pass = enc.beginComputePass();
  for (let i = 0; i < 300; i++) { const g = device.createBindGroup({ layout: pipe.getBindGroupLayout(0), entries }); pass.setPipeline(pipe); pass.setBindGroup(0, g); pass.dispatchWorkgroups(1); }
  pass.end(); device.queue.submit([enc.finish()]); await device.queue.onSubmittedWorkDone();
});
console.log(JSON.stringify(out));
device.destroy();

// What WebGPU (Dawn, the `webgpu` package) exposes on this machine, as JSON on
// stdout: for each way of asking (the default backend, Vulkan forced, the
// fallback adapter), the adapter's info, features and the limits kvflash reads.
// Part of tools/gpu-device/run.sh's record of a lent GPU machine; also runs
// anywhere `webgpu` is installed:  node tools/gpu-device/adapters.mjs
import { create } from "webgpu";

const LIMITS = ["maxStorageBufferBindingSize", "maxBufferSize", "maxComputeWorkgroupStorageSize", "maxComputeInvocationsPerWorkgroup", "maxComputeWorkgroupSizeX", "maxComputeWorkgroupsPerDimension", "maxStorageBuffersPerShaderStage", "minSubgroupSize", "maxSubgroupSize"];

async function probe(flags, options) {
  try {
    const gpu = create(flags);
    const adapter = await gpu.requestAdapter(options);
    if (adapter === null) return { flags, options, adapter: null };
    const info = {};
    for (const k of ["vendor", "architecture", "device", "description", "subgroupMinSize", "subgroupMaxSize", "isFallbackAdapter"]) info[k] = adapter.info[k];
    const limits = {};
    for (const k of LIMITS) if (adapter.limits[k] !== undefined) limits[k] = adapter.limits[k];
    return { flags, options, info, features: [...adapter.features].sort(), limits };
  } catch (e) {
    return { flags, options, error: String(e && e.message ? e.message : e) };
  }
}

const out = [];
out.push(await probe([], { powerPreference: "high-performance" }));
out.push(await probe(["backend=vulkan"], { powerPreference: "high-performance" }));
out.push(await probe(["backend=vulkan"], { powerPreference: "low-power" }));
out.push(await probe([], { forceFallbackAdapter: true }));
console.log(JSON.stringify(out, null, 1));

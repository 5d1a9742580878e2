/// <reference types="@webgpu/types" preserve="true" />
/// <reference types="node" preserve="true" />
// The WebGPU types (GPUDevice, GPUBuffer, …) and the Node types (the model runner loads files) of this
// entry's signatures: the references, kept in the emitted .d.ts, bring @webgpu/types and @types/node
// (both dependencies of kvflash) into a consumer's program. At run time kvflash/gpu needs the optional
// package "webgpu".
/**
 * kvflash/gpu: the WebGPU backend (../shared/ARCHITECTURE.md, "runtime/ gpu/"): device, adapter choice, operators.
 * @module kvflash/gpu
 */
export { DEVICE_KINDS, type DeviceKind, type AdapterDescription, describeAdapter, formatAdapter, parseDeviceKind } from "./adapter.js";
export { GpuDevice, type GpuDeviceOptions, GpuError, type GpuFeature, type GpuLimits } from "./device.js";
export { SWIFTSHADER_ICD, WebGpuUnavailableError, loadWebGpu } from "./webgpu-module.js";
export { GPU_PLAN_SLOTS, gpuFlashAttention, gpuIncreFlashAttention, gpuPagedAttention } from "./attention.js";
export { GpuModelRunner, type GpuModelRunnerOptions, type GpuStepStats } from "./model-runner.js";
export { GpuStepProfiler, type KernelTime } from "./step-profiler.js";
export type { GpuCacheDtype, GpuKvDtype } from "./wgsl/kv-load.js";
export { type LoadedGpuModel, loadGpuModel } from "./load-model.js";

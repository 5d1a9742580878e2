/// <reference types="@webgpu/types" preserve="true" />
// The WebGPU types (GPUDevice, GPUBuffer, …) of this entry's signatures: the reference, kept in the
// emitted .d.ts, brings @webgpu/types into a consumer's program; it is a dependency of the optional
// package "webgpu" that kvflash/gpu needs at run time, and a devDependency here for the build.
/**
 * kvflash/gpu: the WebGPU backend (../shared/ARCHITECTURE.md, "runtime/ gpu/"): device, adapter choice, operators.
 * @module kvflash/gpu
 */
export { DEVICE_KINDS, type DeviceKind, type AdapterDescription, describeAdapter, formatAdapter, parseDeviceKind } from "./adapter.js";
export { GpuDevice, type GpuDeviceOptions, GpuError, type GpuFeature, type GpuLimits } from "./device.js";
export { SWIFTSHADER_ICD, WebGpuUnavailableError, loadWebGpu } from "./webgpu-module.js";
export { GPU_PLAN_SLOTS, gpuFlashAttention, gpuIncreFlashAttention, gpuPagedAttention } from "./attention.js";
export { GpuModelRunner, type GpuModelRunnerOptions } from "./model-runner.js";
export { type LoadedGpuModel, loadGpuModel } from "./load-model.js";

/**
 * Adapter choice (`--device cpu|webgpu|auto`) and the startup description.
 * `webgpu` takes the adapter the implementation offers, software ones
 * included (SwiftShader: how tests run without a GPU); `auto` takes only a
 * real GPU and otherwise answers null (stay on the CPU). Software adapters are
 * recognised by `isFallbackAdapter` and by name (SwiftShader, llvmpipe,
 * lavapipe, WARP).
 */
import { SWIFTSHADER_ICD, WebGpuUnavailableError, loadWebGpu } from "./webgpu-module.js";
import type { DeviceKind } from "./device-kind.js";

export { DEVICE_KINDS, type DeviceKind, parseDeviceKind } from "./device-kind.js";

/** What the startup line says about an adapter. */
export interface AdapterDescription {
  vendor: string;
  /** "" when the implementation leaves it empty (Dawn on NVIDIA's Vulkan driver: the device says "nvidia-h100-80gb-hbm3"). */
  architecture: string;
  device: string;
  /** Driver description ("SwiftShader driver 5.0.0", "NVIDIA 550.54"). */
  driver: string;
  /** A CPU implementation (SwiftShader, llvmpipe, WARP): correct, never fast. */
  software: boolean;
}

const SOFTWARE_NAMES = /swiftshader|llvmpipe|lavapipe|warp|software|cpu/i;

export function describeAdapter(adapter: GPUAdapter): AdapterDescription {
  const i = adapter.info;
  const fallback = (i as GPUAdapterInfo & { isFallbackAdapter?: boolean }).isFallbackAdapter === true;
  const text = `${i.vendor} ${i.architecture} ${i.device} ${i.description}`;
  return {
    vendor: i.vendor || "unknown vendor",
    architecture: i.architecture || "",
    device: i.device || "",
    driver: i.description || "unknown driver",
    software: fallback || SOFTWARE_NAMES.test(text),
  };
}

/** One line for the startup log: `webgpu: nvidia ampere (NVIDIA 550.54)`, or `… software adapter: not GPU speed`. */
export function formatAdapter(d: AdapterDescription): string {
  return `webgpu: ${[d.vendor, d.architecture, d.device].filter((s) => s !== "").join(" ")} (${d.driver})${d.software ? ", a software adapter: correct, not GPU speed" : ""}`;
}

/**
 * The adapter for `kind`: "webgpu" any adapter (throws saying what to install
 * when there is none), "auto" a hardware adapter or null, "cpu" null.
 */
export async function requestAdapter(kind: DeviceKind): Promise<GPUAdapter | null> {
  if (kind === "cpu") return null;
  let gpu: GPU;
  try {
    gpu = await loadWebGpu();
  } catch (e) {
    if (kind === "auto" && e instanceof WebGpuUnavailableError) return null;
    throw e;
  }
  const adapter = await gpu.requestAdapter({ powerPreference: "high-performance" });
  if (adapter === null) {
    if (kind === "auto") return null;
    throw new WebGpuUnavailableError(
      "--device webgpu found no WebGPU adapter. On Linux Dawn needs the Vulkan loader (Debian/Ubuntu: `apt-get install libvulkan1`) " +
        `and a Vulkan driver for the GPU (mesa-vulkan-drivers, or the vendor's). Without a GPU, SwiftShader works: install chromium and set VK_ICD_FILENAMES=${SWIFTSHADER_ICD}.`,
    );
  }
  if (kind === "auto" && describeAdapter(adapter).software) return null;
  return adapter;
}

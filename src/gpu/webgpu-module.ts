/**
 * Where the WebGPU implementation comes from. In Node it is the optional
 * `webgpu` package (Dawn's Node binding, dawn.node prebuilt for linux, mac and
 * windows); in a browser, `navigator.gpu`. Loaded on first use only, so a
 * CPU-only install never touches it.
 *
 * Dawn reaches the GPU through Vulkan on Linux: it needs the Vulkan loader
 * (libvulkan.so.1, Debian's `libvulkan1`) and a driver. For tests without a
 * GPU, SwiftShader (the CPU Vulkan driver in Debian's `chromium`) is selected
 * with VK_ICD_FILENAMES (see SWIFTSHADER_ICD).
 */
/// <reference types="@webgpu/types" />

/** The Vulkan driver manifest of SwiftShader as Debian's chromium installs it. */
export const SWIFTSHADER_ICD = "/usr/lib/chromium/vk_swiftshader_icd.json";

/** A WebGPU implementation could not be loaded; the message says what to install. */
export class WebGpuUnavailableError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WebGpuUnavailableError";
  }
}

/** The part of the `webgpu` package we use: `create(dawnFlags)` returns a GPU. */
interface DawnModule {
  create(flags: string[]): GPU;
}

let cached: Promise<GPU> | undefined;

/** Dawn's flags: Vulkan on Linux (its default picks it too; said for clarity), the platform default elsewhere. */
function dawnFlags(): string[] {
  return process.platform === "linux" ? ["backend=vulkan"] : [];
}

/**
 * The GPU entry point: `navigator.gpu` where it exists, else the `webgpu`
 * package. Throws WebGpuUnavailableError saying what to install when neither is there.
 */
export function loadWebGpu(): Promise<GPU> {
  cached ??= load();
  return cached;
}

async function load(): Promise<GPU> {
  const nav = (globalThis as { navigator?: { gpu?: GPU } }).navigator;
  if (nav?.gpu) return nav.gpu;
  // A variable specifier: the package is optional, so the build must not need it.
  const name = "webgpu";
  let mod: DawnModule;
  try {
    mod = (await import(name)) as DawnModule;
  } catch (e) {
    cached = undefined;
    throw new WebGpuUnavailableError(
      `--device webgpu needs the optional package "webgpu" (Dawn's Node binding), which did not load: ${(e as Error).message}. ` +
        "Install it with `npm install webgpu` (about 130 MB; npm skips it where its prebuilt binary does not fit the platform).",
    );
  }
  return mod.create(dawnFlags());
}

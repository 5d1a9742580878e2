/**
 * Loads a kernel module and builds the imports every instance gets: the one
 * shared memory, and `abort`, which AssemblyScript calls on a failed assertion.
 *
 * Two flavors are built from the same sources (assembly/runtime/flavor.ts):
 *   baseline  build/kernels.wasm          SIMD128 + threads (any engine, Node 20 unflagged)
 *   relaxed   build/kernels-relaxed.wasm  adds relaxed SIMD: FMA and the int8 dot product
 *             (Node ≥ 22). Node 20's V8 11.3 validates it under
 *             --experimental-wasm-relaxed-simd but computes
 *             i32x4.relaxed_dot_i8x16_i7x16_add_s wrong (2·dot, accumulator
 *             dropped; V8 ≥ 11.4 is right), so it is not offered there.
 * The default (defaultKernelFlavor) is relaxed where this engine validates it,
 * except on x64 where V8 does not lower the relaxed int8 dot to AVX-VNNI
 * (Node 22's V8 12, or a CPU without AVX-VNNI: int8 dot "i7" below), where
 * q8 decode measured 0.83× baseline's (BENCHMARKS.md, "Which flavor by
 * default"); the option `kernels` or $KVFLASH_KERNELS overrides.
 */
import { readFileSync } from "node:fs";
import { ArgumentError, show } from "../errors.js";

export const WASM_PAGE = 65536;
/** wasm32 addresses one memory of at most 65536 pages = 4 GiB. */
export const MAX_PAGES = 65536;
export const MAX_MEMORY_BYTES = MAX_PAGES * WASM_PAGE;

export const KERNEL_FLAVORS = ["baseline", "relaxed"] as const;
export type KernelFlavor = (typeof KERNEL_FLAVORS)[number];

const WASM_URLS: Record<KernelFlavor, URL> = {
  baseline: new URL("../../../build/kernels.wasm", import.meta.url),
  relaxed: new URL("../../../build/kernels-relaxed.wasm", import.meta.url),
};

const bytesCache = new Map<KernelFlavor, Buffer>();
const compiled = new Map<KernelFlavor, WebAssembly.Module>();

function kernelBytes(flavor: KernelFlavor): Buffer {
  let bytes = bytesCache.get(flavor);
  if (!bytes) {
    const url = WASM_URLS[flavor];
    try {
      bytes = readFileSync(url);
    } catch (e) {
      throw new Error(`cannot read the kernel module ${url.pathname}: run \`npm run build\` first (${(e as Error).message})`);
    }
    bytesCache.set(flavor, bytes);
  }
  return bytes;
}

/** The first V8 whose relaxed int8 dot product is right (relaxed SIMD shipped in 11.4). */
const RELAXED_MIN_V8: readonly [number, number] = [11, 4];

function v8AtLeast([major, minor]: readonly [number, number]): boolean {
  const [a = 0, b = 0] = process.versions.v8.split(".").map(Number);
  return a > major || (a === major && b >= minor);
}

/** Whether this engine can run the flavor's module (relaxed: V8 ≥ 11.4, i.e. Node ≥ 22). */
export function kernelFlavorAvailable(flavor: KernelFlavor): boolean {
  if (flavor === "relaxed" && !v8AtLeast(RELAXED_MIN_V8)) return false;
  return WebAssembly.validate(kernelBytes(flavor));
}

/**
 * The kernel flavor to run: `requested` (the `kernels` option), else
 * $KVFLASH_KERNELS, else defaultKernelFlavor(). A named flavor that is unknown or that this engine cannot run is
 * an ArgumentError naming where it came from and the value.
 */
export function resolveKernelFlavor(requested?: string): KernelFlavor {
  const env = process.env["KVFLASH_KERNELS"];
  const [name, value] = requested !== undefined ? ["kernels", requested] : env !== undefined && env !== "" ? ["KVFLASH_KERNELS", env] : [undefined, undefined];
  if (name === undefined || value === undefined) return defaultKernelFlavor();
  if (!(KERNEL_FLAVORS as readonly string[]).includes(value)) {
    throw new ArgumentError(name, `must be one of ${KERNEL_FLAVORS.map((f) => JSON.stringify(f)).join(", ")}, got ${show(value)}`);
  }
  const flavor = value as KernelFlavor;
  if (!kernelFlavorAvailable(flavor)) {
    throw new ArgumentError(
      name,
      `is ${show(value)}, but this engine (Node ${process.version}, V8 ${process.versions.v8}) cannot run the relaxed-SIMD kernels: use Node ≥ 22 ` +
        `(Node 20's V8 11.3 computes the relaxed int8 dot product wrong, even under --experimental-wasm-relaxed-simd)`,
    );
  }
  return flavor;
}

/**
 * How the q8 / q4 kernels take their integer dot products
 * (assembly/runtime/flavor.ts DOT_*, assembly/linalg/gemv.ts):
 *   "u8"  relaxed flavor, where the relaxed dot reads its 7-bit operand as
 *         exact unsigned 8 bits and sums in int32 without saturating (V8 ≥ 13
 *         lowers it to AVX-VNNI vpdpbusd): activation codes + 128, minus
 *         128 · Σw, one dot per 16 weight bytes per token.
 *   "i7"  relaxed flavor, any CPU: the relaxed dot with its operand kept in
 *         [0, 127] (|w|, the weight's sign moved onto the int8 codes). The
 *         default where the probe does not find "u8", but on x64: there the
 *         dot is pmaddubsw + pmaddwd behind the sign fix-up, and q8 prefill
 *         and decode ran at 0.81× and 0.87× of "i16" (Node 24, AMD EPYC with
 *         AVX-512 VNNI but not AVX-VNNI, which V8 does not use).
 *   "i16" no relaxed dot: int16 activation codes and i32x4.dot_i16x8_s, the
 *         baseline flavor's only mode, and the relaxed flavor's on x64
 *         without "u8", where its float kernels still take relaxed_madd.
 * Every mode gives the same exact int32 sums, so outputs are bit-identical.
 */
export const INT8_DOT_MODES = ["u8", "i7", "i16"] as const;
export type Int8DotMode = (typeof INT8_DOT_MODES)[number];

/**
 * (a, b, acc) probes whose exact unsigned-operand answers 4·a·b + acc differ
 * from every other known lowering: a pair sum of 2 · 127 · 255 saturates int16
 * (pmaddubsw), b ≥ 128 read as signed flips the sign (sdot).
 */
const INT8_DOT_PROBES: readonly (readonly [number, number, number])[] = [
  [127, 255, 1],
  [-127, 255, -7],
  [-128, 128, 3],
  [5, 200, 0],
];

/**
 * Classifies this engine's relaxed int8 dot by running it (the kernel
 * int8_dot_probe, operands passed at run time) on one instance of the
 * flavor's module: "u8" only for the relaxed flavor where every probe is
 * exact with its second operand unsigned, else "i7" ("i16" for the baseline
 * flavor, which has no relaxed dot). One answer per process and CPU
 * (every instance shares the compiled module and the CPU's features); the
 * runtime passes it to the kernels in their arguments, so every thread of a
 * runtime takes the same path.
 */
export function probeInt8Dot(flavor: KernelFlavor, exports: KernelExports): Int8DotMode {
  if (flavor !== "relaxed") return "i16";
  const probe = exports["int8_dot_probe"]!;
  return INT8_DOT_PROBES.every(([a, b, acc]) => probe(a, b, acc) === 4 * a * b + acc) ? "u8" : "i7";
}

/**
 * The mode a runtime of `flavor` takes without the int8Dot option, given what
 * probeInt8Dot found on CPU architecture `arch` (process.arch): the baseline's
 * "i16"; on relaxed, "u8" where probed, else "i16" on x64 and "i7" elsewhere
 * (INT8_DOT_MODES says why).
 */
export function defaultInt8Dot(flavor: KernelFlavor, arch: string, probed: Int8DotMode): Int8DotMode {
  if (flavor !== "relaxed") return "i16";
  if (probed === "u8") return "u8";
  return arch === "x64" ? "i16" : "i7";
}

/**
 * Whether the relaxed flavor is the better default on a CPU architecture
 * (process.arch) whose relaxed int8 dot probes as `int8Dot`, under V8 major
 * version `v8Major`: everywhere but on x64 with V8 < 13 (Node 22) and no "u8"
 * (AVX-VNNI) lowering. There the relaxed flavor's q8 runs the baseline's int16
 * dot ("i16"), and the baseline's GEMM tiles are the ones built for V8 12
 * (assembly/linalg/gemm.ts gemmFloat2, the 4-token q8 tile): relaxed prefill
 * measured 0.79× (q8), 0.45× (f32), 0.66× (bf16) of baseline, decode
 * 1.02–1.05× (synthetic Qwen2.5-0.5B, 256-token prompt, two threads, one
 * process; tools/ab-builds/ab-flavors.mjs). Node 24 (V8 13.6) on the same
 * CPU: prefill 1.29× (q8), 1.42× (q4), 1.17× (f32), 1.52× (bf16), decode
 * 1.05–1.08×.
 * ARM's sdot is one instruction, so relaxed stays the default there.
 */
export function relaxedPreferred(arch: string, int8Dot: Int8DotMode, v8Major: number): boolean {
  return arch !== "x64" || int8Dot === "u8" || v8Major >= 13;
}

/** This engine's V8 major version (process.versions.v8 "13.6.233.17-node.40" → 13). */
export function v8Major(): number {
  return Number.parseInt(process.versions.v8, 10);
}

let relaxedDotHere: Int8DotMode | undefined;

/** The relaxed module's int8 dot mode on this engine and CPU (probeInt8Dot on a scratch instance, once per process). */
export function relaxedInt8DotHere(): Int8DotMode {
  if (relaxedDotHere === undefined) {
    const scratch = new WebAssembly.Memory({ initial: 256, maximum: MAX_PAGES, shared: true });
    relaxedDotHere = probeInt8Dot("relaxed", instantiate(kernelModule("relaxed"), scratch));
  }
  return relaxedDotHere;
}

/** The flavor a runtime gets without an option or $KVFLASH_KERNELS: relaxed where it runs and relaxedPreferred says so, else baseline. */
export function defaultKernelFlavor(): KernelFlavor {
  return kernelFlavorAvailable("relaxed") && relaxedPreferred(process.arch, relaxedInt8DotHere(), v8Major()) ? "relaxed" : "baseline";
}

/** The kernels as the startup lines name them: "baseline kernels", "relaxed kernels, int8 dot u8". */
export function describeKernels(flavor: KernelFlavor, int8Dot: Int8DotMode): string {
  return flavor === "relaxed" ? `relaxed kernels, int8 dot ${int8Dot}` : `${flavor} kernels`;
}

/** Compiles the flavor's kernel module once per process; workers get the compiled module. */
export function kernelModule(flavor: KernelFlavor = "baseline"): WebAssembly.Module {
  let module = compiled.get(flavor);
  if (!module) {
    module = new WebAssembly.Module(kernelBytes(flavor));
    compiled.set(flavor, module);
  }
  return module;
}

/** Reads an AssemblyScript string (UTF-16, byte length at ptr − 4) from memory. */
function readAsString(memory: WebAssembly.Memory, ptr: number): string {
  if (!ptr) return "";
  const bytes = new Uint32Array(memory.buffer, ptr - 4, 1)[0]!;
  const units = new Uint16Array(memory.buffer.slice(ptr, ptr + bytes));
  return String.fromCharCode(...units);
}

export function kernelImports(memory: WebAssembly.Memory): WebAssembly.Imports {
  return {
    env: {
      memory,
      abort(msg: number, file: number, line: number, column: number): never {
        const where = file ? ` at ${readAsString(memory, file)}:${line}:${column}` : "";
        throw new Error(`abort: ${readAsString(memory, msg)}${where}`);
      },
    },
  };
}

/** Names of the module's exported functions, in export order (the same in every thread). */
export function kernelNames(module: WebAssembly.Module): string[] {
  return WebAssembly.Module.exports(module)
    .filter((e) => e.kind === "function")
    .map((e) => e.name);
}

export type KernelExports = Record<string, (...args: number[]) => number>;

export function instantiate(module: WebAssembly.Module, memory: WebAssembly.Memory): KernelExports {
  return new WebAssembly.Instance(module, kernelImports(memory)).exports as unknown as KernelExports;
}

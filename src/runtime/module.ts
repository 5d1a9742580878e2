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
 * except on x64 where V8 12 (Node 22) does not lower the relaxed int8 dot to
 * one instruction (classifyInt8Dot: AVX-VNNI "unsigned", AVX-VNNI-INT8 "signed"), where
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
export function resolveKernelFlavor(requested?: string, kquantWeights = false): KernelFlavor {
  const env = process.env["KVFLASH_KERNELS"];
  const [name, value] = requested !== undefined ? ["kernels", requested] : env !== undefined && env !== "" ? ["KVFLASH_KERNELS", env] : [undefined, undefined];
  if (name === undefined || value === undefined) return defaultKernelFlavor(kquantWeights);
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
 *         [0, 127] (|w|, the weight's sign moved onto the int8 codes). Exact
 *         on every lowering (INT8_DOT_LOWERINGS); the default where the dot
 *         lowers "signed", and off x64 (defaultInt8Dot).
 *   "i16" no relaxed dot: int16 activation codes and i32x4.dot_i16x8_s, the
 *         baseline flavor's only mode, and the relaxed flavor's on x64
 *         where the dot lowers "saturating" (pmaddubsw; defaultInt8Dot says
 *         what "i7" measured there), its float kernels still on relaxed_madd.
 * Every mode gives the same exact int32 sums, so outputs are bit-identical.
 */
export const INT8_DOT_MODES = ["u8", "i7", "i16"] as const;
export type Int8DotMode = (typeof INT8_DOT_MODES)[number];

/**
 * (a, b, acc) probes whose answers tell the known lowerings of the relaxed
 * int8 dot apart (INT8_DOT_LOWERINGS): a pair sum of 2 · 127 · 255 saturates
 * int16 (pmaddubsw), b ≥ 128 read as signed flips the sign (sdot, vpdpbssd).
 */
const INT8_DOT_PROBES: readonly (readonly [number, number, number])[] = [
  [127, 255, 1],
  [-127, 255, -7],
  [-128, 128, 3],
  [5, 200, 0],
];

/**
 * What the relaxed int8 dot i32x4.relaxed_dot_i8x16_i7x16_add_s(a, b, acc)
 * computes on this engine and CPU when b's bytes reach 128 and more (below
 * 128 every lowering is exact: flavor.ts dotI8U7):
 *   "unsigned"   b read as u8, int32 sums: AVX-VNNI vpdpbusd (V8 ≥ 13). One instruction.
 *   "signed"     b read as i8, int32 sums: ARM sdot, AVX-VNNI-INT8 vpdpbssd. One instruction.
 *   "saturating" b read as u8, pairs summed in int16 with saturation: x64
 *                without AVX-VNNI, pmaddubsw + pmaddwd + paddd (and V8
 *                rebuilds pmaddwd's ones at each use: five instructions).
 *   "unknown"    none of these.
 */
export const INT8_DOT_LOWERINGS = ["unsigned", "signed", "saturating", "unknown"] as const;
export type Int8DotLowering = (typeof INT8_DOT_LOWERINGS)[number];

/** i32x4 lane 0 of each lowering's dot of splat(a), splat(b) (a byte as 0..255) plus acc. */
const INT8_DOT_MODELS: Record<Exclude<Int8DotLowering, "unknown">, (a: number, b: number, acc: number) => number> = {
  unsigned: (a, b, acc) => 4 * a * b + acc,
  signed: (a, b, acc) => 4 * a * (b >= 128 ? b - 256 : b) + acc,
  saturating: (a, b, acc) => 2 * Math.max(-32768, Math.min(32767, 2 * a * b)) + acc,
};

/**
 * Classifies a relaxed int8 dot by its answers to INT8_DOT_PROBES: `dot(a, b,
 * acc)` is the kernel int8_dot_probe (operands passed at run time, so nothing
 * folds them) or a model of it. The first lowering whose model every answer
 * matches, else "unknown".
 */
export function classifyInt8Dot(dot: (a: number, b: number, acc: number) => number): Int8DotLowering {
  const answers = INT8_DOT_PROBES.map(([a, b, acc]) => dot(a, b, acc));
  for (const [name, model] of Object.entries(INT8_DOT_MODELS)) {
    if (INT8_DOT_PROBES.every(([a, b, acc], i) => answers[i] === model(a, b, acc))) return name as Int8DotLowering;
  }
  return "unknown";
}

/**
 * The lowering of the flavor's relaxed int8 dot (classifyInt8Dot on one
 * instance of its module), or null for the baseline flavor, which has none.
 * One answer per process and CPU: every instance shares the compiled module
 * and the CPU's features.
 */
export function probeInt8DotLowering(flavor: KernelFlavor, exports: KernelExports): Int8DotLowering | null {
  if (flavor !== "relaxed") return null;
  const probe = exports["int8_dot_probe"]!;
  return classifyInt8Dot((a, b, acc) => probe(a, b, acc));
}

/**
 * Whether the K-quant kernels may sum int8 dots in int16 pairs
 * (assembly/linalg/kquant-dot.ts gemvQ4KPairs): where the relaxed dot lowers
 * "saturating" (there each i32x4 dot is five instructions, the pairs one
 * pmaddubsw) and the i16x8 relaxed dot they use is exact here
 * (int8_dot_pairs_probe; V8 13.6's Liftoff computes it as b·b on x64 without
 * AVX, where the first calls of a kernel run).
 */
export function probeInt8DotPairs(flavor: KernelFlavor, exports: KernelExports, lowering: Int8DotLowering | null): boolean {
  if (flavor !== "relaxed" || lowering !== "saturating") return false;
  const probe = exports["int8_dot_pairs_probe"]!;
  return ([[-127, 15], [127, 127], [-128, 127], [5, 3], [-1, 0]] as const).every(([a, b]) => probe(a, b) === 4 * a * b);
}

/**
 * The int8-dot modes the probe allows: "u8" only for the relaxed flavor where
 * the dot is "unsigned" (exact on its second operand read as u8), else "i7"
 * ("i16" for the baseline flavor, which has no relaxed dot). The runtime
 * passes its mode to the kernels in their arguments, so every thread of a
 * runtime takes the same path.
 */
export function probeInt8Dot(flavor: KernelFlavor, exports: KernelExports): Int8DotMode {
  const lowering = probeInt8DotLowering(flavor, exports);
  return lowering === null ? "i16" : lowering === "unsigned" ? "u8" : "i7";
}

/**
 * The mode a runtime of `flavor` takes without the int8Dot option, on CPU
 * architecture `arch` (process.arch) whose relaxed dot lowers as `lowering`
 * (null: baseline), chosen by what each mode costs there:
 *   "unsigned"   "u8": one vpdpbusd per 16 weight bytes per token.
 *   "signed"     "i7": one instruction (sdot, vpdpbssd) behind the sign move.
 *   "saturating" "i16" on x64: "i7" is the five-instruction dot behind the
 *                sign move, and q8 linear measured 0.49× (decode, T = 1) and
 *                0.74× (T = 64) of "i16" (Node 24 under --no-enable-avx-vnni
 *                on a Xeon with AVX-VNNI; 0.81× and 0.87× on an AMD EPYC
 *                without it; bench/int8-dot.ts). "i7" elsewhere.
 *   "unknown"    "i16" on x64, "i7" elsewhere.
 */
export function defaultInt8Dot(flavor: KernelFlavor, arch: string, lowering: Int8DotLowering | null): Int8DotMode {
  if (flavor !== "relaxed" || lowering === null) return "i16";
  if (lowering === "unsigned") return "u8";
  if (lowering === "signed") return "i7";
  return arch === "x64" ? "i16" : "i7";
}

/**
 * Whether the relaxed flavor is the better default on a CPU architecture
 * (process.arch) whose relaxed int8 dot lowers as `lowering`, under V8 major
 * version `v8Major`: everywhere but on x64 with V8 < 13 (Node 22) and no
 * one-instruction dot ("unsigned", "signed"). There the relaxed flavor's q8
 * runs the baseline's int16 dot ("i16"), and the baseline's GEMM tiles are
 * the ones built for V8 12 (assembly/linalg/gemm.ts gemmFloat2, the 4-token
 * q8 tile): relaxed prefill measured 0.79× (q8), 0.45× (f32), 0.66× (bf16)
 * of baseline, decode 1.02–1.05× (synthetic Qwen2.5-0.5B, 256-token prompt,
 * two threads, one process; tools/ab-builds/ab-flavors.mjs). Node 24 (V8
 * 13.6) on the same CPU: prefill 1.29× (q8), 1.42× (q4), 1.17× (f32), 1.52×
 * (bf16), decode 1.05–1.08×.
 * ARM's sdot is one instruction, so relaxed stays the default there.
 * A model whose K-quant matrices hold most of its bytes (`kquantWeights`,
 * model/gguf/kquant-source.ts) takes relaxed on V8 12 too: its K-quant decode
 * GEMVs sum int8 pair dots (one `pmaddubsw` per 16 codes, kquant-dot.ts
 * gemvQ4KPairs) where the baseline widens every code to int16 first. A
 * Q4_K_M file of Q4_K and Q6_K decoded 1.17× as fast and prefilled as fast (on
 * the widened codes, kquantWideDefault); one mostly of Q5_0 and Q8_0
 * (Qwen2.5-0.5B's) prefilled 0.86× as fast, so it keeps baseline (Node 22, AMD
 * EPYC Zen 3; BENCHMARKS.md "gguf").
 */
export function relaxedPreferred(arch: string, lowering: Int8DotLowering, v8Major: number, kquantWeights = false): boolean {
  return arch !== "x64" || lowering === "unsigned" || lowering === "signed" || v8Major >= 13 || kquantWeights;
}

/**
 * Whether the K-quant prefill widens each quad's codes to int16 once (the
 * Runtime's kquantWide): always on baseline (one decode of a quad for all its
 * 4-token tiles: Q4_K 1.4×, Q5_K 1.8×, Q6_K's own gain); on relaxed only under
 * V8 < 13, where it ran Q4_K 1.13×, Q5_K 1.24×, Q6_K 1.17× and V8 13's own
 * int8 pair-dot tiles ran as fast or faster (0.89–1.02×).
 */
export function kquantWideDefault(flavor: KernelFlavor, v8Major: number): boolean {
  return flavor === "baseline" || v8Major < 13;
}

/** This engine's V8 major version (process.versions.v8 "13.6.233.17-node.40" → 13). */
export function v8Major(): number {
  return Number.parseInt(process.versions.v8, 10);
}

let relaxedLoweringHere: Int8DotLowering | undefined;

/** How this engine and CPU lower the relaxed int8 dot (probeInt8DotLowering on a scratch instance, once per process). */
export function relaxedInt8DotLoweringHere(): Int8DotLowering {
  if (relaxedLoweringHere === undefined) {
    const scratch = new WebAssembly.Memory({ initial: 256, maximum: MAX_PAGES, shared: true });
    relaxedLoweringHere = probeInt8DotLowering("relaxed", instantiate(kernelModule("relaxed"), scratch)) ?? "unknown";
  }
  return relaxedLoweringHere;
}

/** The relaxed module's allowed int8 dot mode on this engine and CPU (probeInt8Dot): "u8" where the dot lowers "unsigned", else "i7". */
export function relaxedInt8DotHere(): Int8DotMode {
  return relaxedInt8DotLoweringHere() === "unsigned" ? "u8" : "i7";
}

/** The flavor a runtime gets without an option or $KVFLASH_KERNELS: relaxed where it runs and relaxedPreferred says so (for a model with native K-quant matrices or not), else baseline. */
export function defaultKernelFlavor(kquantWeights = false): KernelFlavor {
  return kernelFlavorAvailable("relaxed") && relaxedPreferred(process.arch, relaxedInt8DotLoweringHere(), v8Major(), kquantWeights) ? "relaxed" : "baseline";
}

/**
 * The kernels as the startup lines name them: "baseline kernels",
 * "relaxed kernels, int8 dot u8 (relaxed dot unsigned)": the flavor, the
 * q8 / q4 integer dot mode and, on relaxed, how the relaxed dot lowers here
 * (the two facts defaultKernelFlavor and defaultInt8Dot chose by).
 */
export function describeKernels(flavor: KernelFlavor, int8Dot: Int8DotMode, lowering?: Int8DotLowering | null): string {
  if (flavor !== "relaxed") return `${flavor} kernels`;
  return `relaxed kernels, int8 dot ${int8Dot}${lowering ? ` (relaxed dot ${lowering})` : ""}`;
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

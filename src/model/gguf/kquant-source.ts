/**
 * Whether a model keeps K-quant matrices natively, asked before its runtime
 * starts: the default kernel flavor weighs it (RuntimeOptions.kquantWeights,
 * runtime/module.ts relaxedPreferred); modelRuntimeOptions gives `kvflash
 * serve` and `generate` their runtime's options with it.
 */
import { isKquantFormat } from "../../ops/weight.js";
import type { RuntimeOptions } from "../../runtime/runtime.js";
import { readGgufHeader } from "../../sources/gguf/reader.js";
import type { ModelSource } from "../../sources/model-source.js";
import { LOAD_DEFAULTS, type LoadSettings } from "../load-settings.js";

/** The options a model's runtime starts with: threads and kernels as the load settings give them, and the K-quant hint of its file. */
export function modelRuntimeOptions(load: Pick<LoadSettings, "threads" | "kernels" | "weights">, source: ModelSource): RuntimeOptions {
  return { ...(load.threads === undefined ? {} : { threads: load.threads }), ...(load.kernels === undefined ? {} : { kernels: load.kernels }), kquantWeights: kquantModelSource(source, load.weights) };
}

/**
 * True for a GGUF file whose Q2_K … Q6_K and IQ4_XS tensors hold more than half
 * of its tensor bytes, loaded with weights "auto" (the default: any other
 * format converts them): the K-quant kernels then carry most of a step. A
 * Q4_K_M file of 256-aligned layers is all Q4_K and Q6_K; Qwen2.5-0.5B's (hidden
 * 896) is mostly Q5_0 and Q8_0, its Q6_K a fifth of the bytes. Reads the
 * header only; a file it cannot read answers false, and the loader then names
 * what is wrong with it.
 */
export function kquantModelSource(source: ModelSource, weights: string | undefined): boolean {
  if (source.kind !== "gguf" || (weights ?? LOAD_DEFAULTS.weights) !== "auto") return false;
  let kquant = 0, all = 0;
  try {
    for (const t of readGgufHeader(source.path).tensors) {
      all += t.end - t.begin;
      if (t.type.cpuFormat !== null && isKquantFormat(t.type.cpuFormat)) kquant += t.end - t.begin;
    }
  } catch {
    return false;
  }
  return kquant > all / 2;
}

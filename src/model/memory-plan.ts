/**
 * The memory plan of a model, made from its config alone before the first
 * weight byte is read: the bytes of its converted weights, the KV cache size,
 * the activations, where each part goes (placement.ts), and whether all of it
 * fits this machine and the wasm32 memories. A model that does not fit is
 * refused here, in one error that names the sizes and what to change —
 * never after a minute of loading, never by a V8 abort.
 *
 * KV cache sizing follows vLLM's CPU backend: one budget for the whole cache
 * (VLLM_CPU_KVCACHE_SPACE there, `kvCacheBytes` / `--kv-cache-gib` here,
 * default 4 GiB as there, and never more than half of the memory left after
 * the weights), but never more blocks than `maxNumSeqs` sequences of
 * `maxModelLen` tokens need (vLLM's scheduler could not use more). Every
 * memory's pool holds the same block ids for its own layers, so the
 * bytes spread over the memories in proportion to the layers they hold.
 */
import { freemem, totalmem } from "node:os";
import { ArgumentError, show } from "../errors.js";
import type { KvCacheDType } from "../kv/kv-quant.js";
import { type StorageFormat, weightBytes } from "../ops/weight.js";
import { formatBytes } from "../runtime/allocator.js";
import { MAX_MEMORY_BYTES } from "../runtime/module.js";
import { DTYPE_BYTES } from "../tensor/dtype.js";
import type { ModelConfig } from "./config.js";
import { type ModelLengthLimit, modelLengthLimit } from "./max-model-len.js";
import { type Placement, type PlacedPart, placeAuto } from "./placement.js";
import { StepBuffers } from "./step-buffers.js";

const MIB = 2 ** 20;
const GIB = 2 ** 30;

/** The KV budget when none is given: vLLM CPU's default KV cache space. */
export const DEFAULT_KV_CACHE_BYTES = 4 * GIB;
/** Context the size check insists on when maxModelLen is not given (min with the model's limit). */
export const MIN_DEFAULT_CONTEXT = 2048;
/** Per memory, beyond the step buffers: ops workspace, attention plan, RoPE tables, thread scratch, control. */
const WORKSPACE_SLACK = 16 * MIB;

export interface MachineMemory {
  /** Bytes of RAM (os.totalmem()). */
  total: number;
  /** Bytes available now (os.freemem(): MemAvailable on Linux). */
  available: number;
}

/**
 * Bytes of the matrices of each part when they are not all `format` (a GGUF
 * whose ggml types stay native: Q4_K_M mixes q4_k, q6_k and q8 by tensor).
 */
export interface WeightSizes {
  /** The embedding matrix. */
  embedding: number;
  /** Each layer's four matrices (fused QKV, O, fused gate/up, down) together. */
  layers: readonly number[];
  /** The LM head matrix (0 when tied to the embedding). */
  lmHead: number;
}

export interface MemoryPlanOptions {
  format: StorageFormat;
  /** The real matrix sizes, where they differ from `format`'s. */
  weightSizes?: WeightSizes;
  kvDtype: KvCacheDType;
  blockSize: number;
  /** Exact KV blocks (wins; refused with kvCacheBytes). */
  numBlocks?: number;
  /** The KV budget in bytes. Default DEFAULT_KV_CACHE_BYTES, at most half of what the machine has left after the weights. */
  kvCacheBytes?: number;
  /** Longest sequence asked for, already checked against the model (max-model-len.ts); it must fit in the KV cache. Default: the model's limit, as far as the KV cache holds it. */
  maxModelLen?: number;
  /** The model's own limit (max-model-len.ts modelLengthLimit). Default: the config's. */
  lengthLimit?: ModelLengthLimit;
  /** Sequences at once (the engine's max_num_seqs): caps the KV cache at what they can use. Default 1. */
  maxNumSeqs?: number;
  /** Tokens and logit rows a step's activations are sized for. */
  maxBatchTokens: number;
  maxLogitRows: number;
  /** Bytes per element of the checkpoint's tensors (held while a part converts). Default 2. */
  sourceElementBytes?: number;
  /** Bytes one wasm memory may hold. Default 4 GiB (wasm32). Tests lower it to force placement across memories. */
  memoryBytes?: number;
  /** The machine's memory. Default os.totalmem() / os.freemem(). */
  machine?: MachineMemory;
}

export interface MemoryPlan {
  format: StorageFormat;
  kvDtype: KvCacheDType;
  blockSize: number;
  numBlocks: number;
  /** Longest sequence: given, or min(the model's limit, the cache's slots). The runners, the engine and the server read this one value. */
  maxModelLen: number;
  /** Bytes of one KV block in one layer (K and V, scales included). */
  kvBytesPerLayerBlock: number;
  /** Bytes of the converted weights. */
  weightBytes: number;
  /** Bytes of the KV cache over all layers. */
  kvBytes: number;
  /** Bytes of activations and workspaces in each memory. */
  activationBytes: number;
  placement: Placement;
  /** Bytes of every memory at its peak, summed: what the process needs beyond Node itself. */
  totalBytes: number;
}

const align64 = (n: number): number => Math.ceil(n / 64) * 64;

/** Bytes of one KV block of one layer: K and V (and int8's per-token f32 scales). */
export function kvBytesPerLayerBlock(config: ModelConfig, blockSize: number, dtype: KvCacheDType): number {
  const rows = blockSize * config.numKvHeads;
  return 2 * (rows * config.headDim * DTYPE_BYTES[dtype] + (dtype === "int8" ? rows * 4 : 0));
}

/**
 * Bytes one decoder layer's converted weights take (matrices in `format`, or
 * `matrixBytes` when given; norms and biases f32, each 64-aligned).
 */
export function layerWeightBytes(config: ModelConfig, format: StorageFormat, matrixBytes?: number): number {
  const { hiddenSize: h, numHeads: H, numKvHeads: Hkv, headDim: D, intermediateSize: I } = config;
  const qkvRows = (H + 2 * Hkv) * D;
  let n = matrixBytes ?? weightBytes(format, qkvRows, h) + weightBytes(format, h, H * D) + weightBytes(format, 2 * I, h) + weightBytes(format, h, I);
  n += (config.sandwichNorms ? 4 : 2) * align64(h * 4); // input and post-attention norms (Gemma: and its two post-norms)
  if (config.qkvBias) n += align64(qkvRows * 4);
  if (config.qkNorm) n += 2 * align64(D * 4);
  if (config.oProjBias) n += align64(h * 4);
  if (config.mlpBias) n += align64(2 * I * 4) + align64(h * 4);
  return n;
}

/** Elements of one layer's checkpoint tensors. */
function layerParams(config: ModelConfig): number {
  const { hiddenSize: h, numHeads: H, numKvHeads: Hkv, headDim: D, intermediateSize: I } = config;
  return (H + 2 * Hkv) * D * h + h * H * D + 3 * I * h + (config.sandwichNorms ? 4 : 2) * h;
}

/**
 * Sizes the KV cache, places the parts and checks that the model fits: one
 * memory's budget per part, the machine's RAM and what is available now.
 * Throws an ArgumentError naming the sizes and the options that would help.
 */
export function planModelMemory(config: ModelConfig, options: MemoryPlanOptions): MemoryPlan {
  const { format, kvDtype, blockSize } = options;
  const memoryBudget = options.memoryBytes ?? MAX_MEMORY_BYTES;
  if (!Number.isInteger(memoryBudget) || memoryBudget < 1 || memoryBudget > MAX_MEMORY_BYTES) {
    throw new ArgumentError("memoryBytes", `must be an integer in [1, ${MAX_MEMORY_BYTES}], got ${show(memoryBudget)}`);
  }
  const machine = options.machine ?? { total: totalmem(), available: freemem() };
  const maxNumSeqs = options.maxNumSeqs ?? 1;
  const src = options.sourceElementBytes ?? 2;
  const { hiddenSize: h, vocabSize: V, numLayers: L } = config;

  // Sizes from the config alone (or the real matrix sizes given).
  const given = options.weightSizes;
  if (given && given.layers.length !== L) throw new ArgumentError("weightSizes.layers", `must give the bytes of each of the ${L} layers, got ${given.layers.length}`);
  const eachLayer = Array.from({ length: L }, (_, l) => layerWeightBytes(config, format, given?.layers[l]));
  const layerWeights = Math.max(...eachLayer);
  const embedding = given?.embedding ?? weightBytes(format, V, h);
  const headWeights = align64(h * 4) + (config.tieWordEmbeddings ? 0 : given?.lmHead ?? weightBytes(format, V, h));
  const weightTotal = embedding + eachLayer.reduce((a, b) => a + b, 0) + headWeights;
  const activationBytes = StepBuffers.bytes(config, options.maxBatchTokens, options.maxLogitRows) + 2 * options.maxBatchTokens * Math.max(h, config.intermediateSize) * 4 + WORKSPACE_SLACK;
  const perLayerBlock = kvBytesPerLayerBlock(config, blockSize, kvDtype);
  const perBlock = perLayerBlock * L;
  const blocksFor = (tokens: number): number => Math.ceil(tokens / blockSize);

  // The context the cache must hold for one sequence, and what the sequences could use at most.
  const explicitLen = options.maxModelLen;
  const modelLimit = (options.lengthLimit ?? modelLengthLimit(config)).tokens;
  const minContext = explicitLen ?? Math.min(modelLimit, MIN_DEFAULT_CONTEXT);
  const minBlocks = blocksFor(minContext);
  const neededBlocks = maxNumSeqs * blocksFor(explicitLen ?? modelLimit);

  // Blocks: exact, or the budget's worth capped at what the sequences need.
  let numBlocks: number;
  if (options.numBlocks !== undefined) {
    numBlocks = options.numBlocks;
  } else {
    const left = Math.max(0, machine.available - weightTotal - activationBytes);
    const budget = options.kvCacheBytes ?? Math.max(minBlocks * perBlock, Math.min(DEFAULT_KV_CACHE_BYTES, Math.floor(left / 2)));
    numBlocks = Math.min(Math.floor(budget / perBlock), neededBlocks);
    if (numBlocks < 1) {
      throw new ArgumentError("kvCacheBytes", `must hold at least one KV block of ${formatBytes(perBlock)} (${blockSize} tokens × ${L} layers, ${kvDtype}), got ${formatBytes(Math.max(0, budget))}`);
    }
    // The tightest memory: one layer with its KV share must fit alone.
    const room = memoryBudget - activationBytes - layerWeights - layerParams(config) * src;
    const fitsOne = Math.floor(room / perLayerBlock);
    if (fitsOne < numBlocks && fitsOne >= Math.min(minBlocks, numBlocks)) numBlocks = fitsOne;
  }
  const slots = numBlocks * blockSize;
  if (explicitLen !== undefined && explicitLen > slots) {
    throw new ArgumentError("maxModelLen", `must fit in the KV cache (${numBlocks} blocks × ${blockSize} = ${slots} tokens at ${formatBytes(perBlock / blockSize)} a token): got ${explicitLen}; give the cache more memory or lower maxModelLen`);
  }
  const maxModelLen = explicitLen ?? Math.min(modelLimit, slots);

  const kvBytes = numBlocks * perBlock;
  const help = advice(format, options.numBlocks !== undefined);
  const sizes = (total: number, memories: number): string =>
    `${formatBytes(weightTotal)} of ${format} weights + ${formatBytes(kvBytes)} of KV cache (${numBlocks} blocks × ${blockSize} tokens, ${kvDtype}) + ${formatBytes(activationBytes * memories)} of activations and loading room = ${formatBytes(total)}`;
  // Beyond the machine whatever the placement: say so first.
  const least = weightTotal + kvBytes + activationBytes;
  if (least > machine.total) throw new ArgumentError("model", `does not fit in this machine's ${formatBytes(machine.total)} of memory: it needs at least ${sizes(least, 1)}; ${help}`);

  const part = (name: string, bytes: number, params: number): PlacedPart => ({ name, bytes, loadBytes: params * src });
  const placement = tryPlace(
    {
      embedding: part("embedding", embedding, V * h),
      layers: eachLayer.map((bytes, l) => part(`layer ${l}`, bytes + numBlocks * perLayerBlock, layerParams(config))),
      head: part("final norm and LM head", headWeights, config.tieWordEmbeddings ? h : V * h + h),
      tied: config.tieWordEmbeddings,
      perMemoryBytes: activationBytes,
      memoryBudget,
    },
    { weightTotal, layerWeights, numBlocks, perLayerBlock, format },
  );
  const totalBytes = placement.memories.reduce((s, m) => s + m.bytes, 0);
  const needs = sizes(totalBytes, placement.memories.length);
  if (totalBytes > machine.total) {
    throw new ArgumentError("model", `does not fit in this machine's ${formatBytes(machine.total)} of memory: it needs ${needs}; ${help}`);
  }
  if (totalBytes > machine.available) {
    throw new ArgumentError("model", `does not fit in the ${formatBytes(machine.available)} of memory available now (of ${formatBytes(machine.total)}): it needs ${needs}; ${help}`);
  }
  return { format, kvDtype, blockSize, numBlocks, maxModelLen, kvBytesPerLayerBlock: perLayerBlock, weightBytes: weightTotal, kvBytes, activationBytes, placement, totalBytes };
}

function advice(format: StorageFormat, exactBlocks: boolean): string {
  const smaller = format === "q4" ? "" : format === "q8" ? "--weights q4, " : "--weights q8 or q4, ";
  return `try ${smaller}a lower --max-model-len or ${exactBlocks ? "--num-gpu-blocks-override" : "--kv-cache-gib"}`;
}

/** placeAuto, with its error rephrased in the loader's terms (which sizes, which options). */
function tryPlace(
  input: Parameters<typeof placeAuto>[0],
  s: { weightTotal: number; layerWeights: number; numBlocks: number; perLayerBlock: number; format: StorageFormat },
): Placement {
  try {
    return placeAuto(input);
  } catch (e) {
    if (!(e instanceof ArgumentError)) throw e;
    throw new ArgumentError(
      "model",
      `cannot be placed in wasm32 memories of ${formatBytes(input.memoryBudget)}: ${e.message} ` +
        `(a layer is ${formatBytes(s.layerWeights)} of ${s.format} weights + ${formatBytes(s.numBlocks * s.perLayerBlock)} of KV cache); ${advice(s.format, false)}`,
    );
  }
}

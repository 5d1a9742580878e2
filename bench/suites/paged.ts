/**
 * Suite `paged`: pagedAttention decode at the attention suite's shapes (H = 32,
 * Hkv = 8, D = 128, one query per sequence, B ∈ {1, 8, 32}, Sk ∈ {1024, 4096,
 * 16384}), block size 16, each sequence's blocks a random permutation of the
 * pool, on all threads:
 *
 * - `paged_over_padded`: pagedAttention time / increFlashAttention time on a
 *   padded BNSD cache (the attention suite's layout) holding the same rows,
 *   f32 and bf16 (target ≤ 1.10). Each row of K/V is a slice of one pattern
 *   chosen by a hash of (sequence, token, KV head). Each sequence's blocks
 *   are a random permutation of the pool (a long-running pool's worst case);
 *   `paged_in_order_over_padded` reads the same cache through a table listing
 *   blocks in id order (a fresh pool; other rows of the cache, timing only).
 * - `kv_dtype` rows with `speedup_vs_f32` = paged f32 time / this dtype's
 *   time: f32, bf16, f16, fp8 e4m3 / e5m2 (per-tensor scale), int8 per-token
 *   and per-channel on the dequantize path and on the integer path
 *   (`int8_path` high-performance / high-precision). Targets: int8 decode
 *   faster than f32; the integer path faster than the dequantize path.
 * - `cascade_over_paged`: cascadeAttention / pagedAttention for B sequences
 *   sharing a 4096-token prefix, each with 256 own tokens (f32, and int8 on the
 *   integer path).
 *
 * Every ratio is taken from its two operations timed in alternating rounds
 * (ctx.timeInterleaved, harness.ts): the 2 cores are shared, and load that comes and goes
 * during a run then hits both sides alike. The f32 row of a shape reports the
 * median of its pairings, and a warning is logged when they disagree by > 15%.
 *
 * `roofline = max(bytes / read_bw, flops / simd_flops) / ms` as in the
 * attention suite (flops = 4·D per query head and key; bytes = K and V as
 * stored plus scales, q and out). The integer path's dot products are not f32
 * FLOPs; its gflops column counts the same 4·D per head and key.
 *
 * B = 32, Sk = 16384 (4.3 GB of f32 K/V, beyond wasm32's 4 GiB) maps every
 * sequence's table onto one sequence's blocks, and the padded baseline is the
 * attention suite's batch-stride-0 view of one sequence: the same physical
 * rows. Successive calls cycle through layers (copies) spanning ≥ 96 MB so a
 * call's K/V is not in the L3, as in the attention suite.
 */
import {
  AttentionPlan,
  type Int8Path,
  type KvCacheDType,
  type PagedKvCacheOptions,
  PagedKvCache,
  type Runtime,
  Tensor,
  cascadeAttention,
  increFlashAttention,
  pagedAttention,
  planCascadeAttention,
  planPagedAttention,
} from "../../src/ops-entry.js";
import { encodeValue, storageArray } from "../../src/tensor/codec.js";
import type { Ceilings } from "../ceilings.js";
import { type Row, type Suite, type SuiteContext, median } from "../harness.js";

const H = 32;
const HKV = 8;
const D = 128;
const BLOCK = 16;
/** Decode cycles through cache layers spanning at least this many bytes: > the 32 MiB L3. */
const LAYER_SPAN = 96e6;
/**
 * Largest K + V storage (bytes) of one cache; bigger batches share one
 * sequence's blocks. Two caches are alive at once (the pairs timed together),
 * inside wasm32's 4 GiB.
 */
const MAX_KV_BYTES = 1.1e9;
const PATTERN = 4099;

interface DtypeCase {
  kv_dtype: KvCacheDType;
  int8_scaling?: "per-token" | "per-channel";
  int8_path?: Int8Path;
}

const DTYPE_CASES: DtypeCase[] = [
  { kv_dtype: "f32" },
  { kv_dtype: "bf16" },
  { kv_dtype: "f16" },
  { kv_dtype: "fp8e4m3" },
  { kv_dtype: "fp8e5m2" },
  { kv_dtype: "int8", int8_scaling: "per-token", int8_path: "dequantize" },
  { kv_dtype: "int8", int8_scaling: "per-token", int8_path: "high-performance" },
  { kv_dtype: "int8", int8_scaling: "per-token", int8_path: "high-precision" },
  { kv_dtype: "int8", int8_scaling: "per-channel", int8_path: "dequantize" },
  { kv_dtype: "int8", int8_scaling: "per-channel", int8_path: "high-performance" },
];

const elemBytes = (dt: KvCacheDType): number => (dt === "f32" ? 4 : dt === "f16" || dt === "bf16" ? 2 : 1);

function shapes(quick: boolean): { b: number; sk: number }[] {
  const out: { b: number; sk: number }[] = [];
  for (const b of quick ? [1, 8] : [1, 8, 32]) for (const sk of quick ? [1024, 4096] : [1024, 4096, 16384]) out.push({ b, sk });
  return out;
}

/** Stored codes of small pseudo-random values (|x| < 0.5; int8: codes in [−64, 64)), PATTERN + D long. */
function pattern(dt: KvCacheDType, seed: number): ArrayLike<number> {
  let s = seed;
  const next = () => (s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32 - 0.5;
  const values = Array.from({ length: PATTERN + D }, next);
  if (dt === "f32") return Float32Array.from(values);
  if (dt === "int8") return Int8Array.from(values, (x) => Math.round(x * 128));
  return values.map((x) => encodeValue(dt, x));
}

/** Where row (b, s, h) starts in the pattern: the same in every cache layout. */
const rowOffset = (b: number, s: number, h: number): number => (Math.imul(b * 65599 + s * 31 + h, 2654435761) >>> 0) % PATTERN;

/** bytes of K + V (+ per-token scales) a decode step reads, and flops, per the file comment. */
function work(b: number, sk: number, dt: KvCacheDType, scaling: string | undefined): { flops: number; bytes: number } {
  const kv = 2 * b * HKV * sk * D * elemBytes(dt) + (scaling === "per-token" ? 2 * b * HKV * sk * 4 : 0);
  return { flops: 4 * D * H * b * sk, bytes: kv + 2 * b * H * D * 4 };
}

function roofline(flops: number, bytes: number, ms: number, c: Ceilings): { gflops: number; gbps: number; roofline: number } {
  const bound = Math.max(bytes / (c.read_gbps_all * 1e6), flops / (c.simd_gflops_all * 1e6));
  return { gflops: flops / (ms * 1e6), gbps: bytes / (ms * 1e6), roofline: bound / ms };
}

interface PagedSetup {
  cache: PagedKvCache;
  layers: number;
  /** int32 [B, maxBlocksPerSeq] */
  table: Int32Array;
  shared: boolean;
}

/** A paged cache for B sequences of sk keys (all written), blocks permuted; layers to cycle through. */
function pagedSetup(rt: Runtime, b: number, sk: number, dc: DtypeCase, seed: number): PagedSetup {
  const perSeq = Math.ceil(sk / BLOCK);
  const seqBytes = 2 * sk * HKV * D * elemBytes(dc.kv_dtype);
  const shared = b * seqBytes > MAX_KV_BYTES;
  const physB = shared ? 1 : b;
  const layerBytes = physB * seqBytes;
  const layers = Math.max(1, Math.min(Math.floor(MAX_KV_BYTES / layerBytes), Math.ceil(LAYER_SPAN / layerBytes)));
  const options: PagedKvCacheOptions = { numLayers: layers, numBlocks: physB * perSeq, blockSize: BLOCK, numKvHeads: HKV, headDim: D, dtype: dc.kv_dtype };
  if (dc.int8_scaling === "per-channel") {
    const s = new Float32Array(HKV * D).fill(1 / 256);
    options.int8 = { mode: "per-channel", kScale: s, vScale: s };
  } else if (dc.int8_scaling === "per-token") options.int8 = { mode: "per-token" };
  const cache = new PagedKvCache(rt, options);
  // A random permutation of the pool: sequence b's i-th block.
  const ids = Array.from({ length: physB * perSeq }, (_, i) => i);
  let s = seed;
  for (let i = ids.length - 1; i > 0; i--) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    const j = s % (i + 1);
    [ids[i], ids[j]] = [ids[j]!, ids[i]!];
  }
  const table = new Int32Array(b * perSeq);
  for (let q = 0; q < b; q++) for (let i = 0; i < perSeq; i++) table[q * perSeq + i] = ids[(shared ? 0 : q) * perSeq + i]!;
  const pk = subarrayable(pattern(dc.kv_dtype, 1), dc.kv_dtype);
  const pv = subarrayable(pattern(dc.kv_dtype, 2), dc.kv_dtype);
  for (let l = 0; l < layers; l++) {
    const layer = cache.layer(l);
    const kd = storageArray(dc.kv_dtype, rt.memory.buffer, layer.k.ptr, layer.k.numel);
    const vd = storageArray(dc.kv_dtype, rt.memory.buffer, layer.v.ptr, layer.v.numel);
    for (let q = 0; q < physB; q++) {
      for (let t = 0; t < sk; t++) {
        const slot = table[q * perSeq + Math.floor(t / BLOCK)]! * BLOCK + (t % BLOCK);
        for (let h = 0; h < HKV; h++) {
          const o = rowOffset(q, t, h);
          kd.set(pk.subarray(o, o + D), (slot * HKV + h) * D);
          vd.set(pv.subarray(o, o + D), (slot * HKV + h) * D);
        }
      }
    }
    if (layer.kScale && dc.int8_scaling === "per-token") {
      layer.kScale.fill(0.5 / 127);
      layer.vScale!.fill(0.5 / 127);
    }
  }
  return { cache, layers, table, shared };
}

function subarrayable(p: ArrayLike<number>, dt: KvCacheDType): Float32Array | Uint16Array | Uint8Array | Int8Array {
  if (dt === "f32") return p as Float32Array;
  if (dt === "int8") return p as Int8Array;
  return dt === "f16" || dt === "bf16" ? Uint16Array.from(p) : Uint8Array.from(p);
}

interface Runner {
  /** One decode step (the next layer each call). */
  run: () => void;
  /** pagedRunner only: the same step through a table listing each sequence's blocks in id order (timing only: other rows of the cache). */
  runInOrder?: () => void;
  /** What the step covers, for the log. */
  note: string;
  dispose: () => void;
}

/** pagedAttention decode steps over a fresh paged cache, cycling layers. */
function pagedRunner(rt: Runtime, b: number, sk: number, dc: DtypeCase): Runner {
  const setup = pagedSetup(rt, b, sk, dc, 7);
  const q = rt.tensor("f32", [b, H, D]).fill(0.25);
  const out = rt.tensor("f32", [b, H, D]);
  const batch = { cuSeqlensQ: Array.from({ length: b + 1 }, (_, i) => i), seqLens: new Array<number>(b).fill(sk) };
  const plan = planPagedAttention(rt, { cache: setup.cache, numHeads: H, ...batch, blockTable: setup.table });
  // The fresh-pool case: each sequence's blocks consecutive in memory.
  const perSeq = setup.table.length / b;
  const ordered = Int32Array.from(setup.table, (_, i) => (setup.shared ? i % perSeq : i));
  const planInOrder = planPagedAttention(rt, { cache: setup.cache, numHeads: H, ...batch, blockTable: ordered });
  const path = dc.int8_path ? { int8Path: dc.int8_path } : {};
  let layer = 0;
  return {
    run: () => {
      pagedAttention(rt, { q, cache: setup.cache, layer, plan, out, ...path });
      layer = (layer + 1) % setup.layers;
    },
    runInOrder: () => {
      pagedAttention(rt, { q, cache: setup.cache, layer, plan: planInOrder, out, ...path });
      layer = (layer + 1) % setup.layers;
    },
    note: `${setup.layers} layer${setup.layers > 1 ? "s" : ""}${setup.shared ? ", all sequences on one sequence's blocks" : ""}; plan: ${plan.reason}`,
    dispose: () => {
      plan.dispose();
      planInOrder.dispose();
      rt.free(q);
      rt.free(out);
      setup.cache.dispose();
    },
  };
}

/** increFlashAttention decode steps on a padded BNSD cache holding the same rows as pagedSetup writes. */
function paddedRunner(rt: Runtime, b: number, sk: number, dt: "f32" | "bf16"): Runner {
  const seqBytes = 2 * sk * HKV * D * elemBytes(dt);
  const shared = b * seqBytes > MAX_KV_BYTES;
  const physB = shared ? 1 : b;
  const layerBytes = physB * seqBytes;
  const layers = Math.max(1, Math.min(Math.floor(MAX_KV_BYTES / layerBytes), Math.ceil(LAYER_SPAN / layerBytes)));
  const per = physB * HKV * sk * D;
  const kBuf = rt.tensor(dt, [layers * per]);
  const vBuf = rt.tensor(dt, [layers * per]);
  const pk = subarrayable(pattern(dt, 1), dt);
  const pv = subarrayable(pattern(dt, 2), dt);
  const kd = storageArray(dt, rt.memory.buffer, kBuf.ptr, kBuf.numel);
  const vd = storageArray(dt, rt.memory.buffer, vBuf.ptr, vBuf.numel);
  for (let l = 0; l < layers; l++) {
    for (let q = 0; q < physB; q++) {
      for (let h = 0; h < HKV; h++) {
        for (let t = 0; t < sk; t++) {
          const o = rowOffset(q, t, h);
          const at = l * per + ((q * HKV + h) * sk + t) * D;
          kd.set(pk.subarray(o, o + D), at);
          vd.set(pv.subarray(o, o + D), at);
        }
      }
    }
  }
  const eb = elemBytes(dt);
  const strides = [shared ? 0 : HKV * sk * D, sk * D, D, 1];
  const view = (buf: Tensor, l: number) => new Tensor(rt.memory, buf.ptr + l * per * eb, dt, [b, HKV, sk, D], strides);
  const ks = Array.from({ length: layers }, (_, l) => view(kBuf, l));
  const vs = Array.from({ length: layers }, (_, l) => view(vBuf, l));
  const q = rt.tensor("f32", [b, H, 1, D]).fill(0.25);
  const out = rt.tensor("f32", [b, H, 1, D]);
  const plan = AttentionPlan.create(rt, { actualSeqLengths: new Array<number>(b).fill(sk), numHeads: H, numKvHeads: HKV, headDim: D });
  let layer = 0;
  return {
    run: () => {
      increFlashAttention(rt, { q, k: ks[layer]!, v: vs[layer]!, plan, out });
      layer = (layer + 1) % layers;
    },
    note: `${layers} layer${layers > 1 ? "s" : ""}; plan: ${plan.reason}`,
    dispose: () => {
      plan.dispose();
      for (const t of [q, out, kBuf, vBuf]) rt.free(t);
    },
  };
}

function label(dc: DtypeCase): string {
  return dc.int8_scaling ? `${dc.kv_dtype} ${dc.int8_scaling} ${dc.int8_path}` : dc.kv_dtype;
}

async function cascadeRows(rt: Runtime, ctx: SuiteContext): Promise<Row[]> {
  const rows: Row[] = [];
  const prefix = 4096;
  const own = 256;
  for (const dc of [DTYPE_CASES[0]!, DTYPE_CASES[6]!]) {
    for (const b of ctx.quick ? [8] : [8, 32]) {
      const perSeq = (prefix + own) / BLOCK;
      const sharedBlocks = prefix / BLOCK;
      const numBlocks = sharedBlocks + b * (own / BLOCK);
      const cache = new PagedKvCache(rt, {
        numLayers: 1,
        numBlocks,
        blockSize: BLOCK,
        numKvHeads: HKV,
        headDim: D,
        dtype: dc.kv_dtype,
        ...(dc.int8_scaling ? { int8: { mode: "per-token" as const } } : {}),
      });
      const layer = cache.layer(0);
      const pk = subarrayable(pattern(dc.kv_dtype, 1), dc.kv_dtype);
      const kd = storageArray(dc.kv_dtype, rt.memory.buffer, layer.k.ptr, layer.k.numel);
      const vd = storageArray(dc.kv_dtype, rt.memory.buffer, layer.v.ptr, layer.v.numel);
      for (let i = 0; i < kd.length; i += PATTERN) {
        kd.set(pk.subarray(0, Math.min(PATTERN, kd.length - i)), i);
        vd.set(pk.subarray(0, Math.min(PATTERN, vd.length - i)), i);
      }
      layer.kScale?.fill(0.5 / 127);
      layer.vScale?.fill(0.5 / 127);
      const table = new Int32Array(b * perSeq);
      for (let q = 0; q < b; q++) {
        for (let i = 0; i < perSeq; i++) table[q * perSeq + i] = i < sharedBlocks ? i : sharedBlocks + q * (own / BLOCK) + (i - sharedBlocks);
      }
      const batch = { cuSeqlensQ: Array.from({ length: b + 1 }, (_, i) => i), seqLens: new Array<number>(b).fill(prefix + own), blockTable: table };
      const q = rt.tensor("f32", [b, H, D]).fill(0.25);
      const out = rt.tensor("f32", [b, H, D]);
      const path = dc.int8_path ? { int8Path: dc.int8_path } : {};
      const plan = planPagedAttention(rt, { cache, numHeads: H, ...batch });
      const cplan = planCascadeAttention(rt, { cache, numHeads: H, sharedPrefixLength: prefix, ...batch });
      const [msPaged, msCascade] = await ctx.timeInterleaved(
        [() => pagedAttention(rt, { q, cache, layer: 0, plan, out, ...path }), () => cascadeAttention(rt, { q, cache, layer: 0, plan: cplan, out, ...path })],
        ctx.quick ? 100 : 400,
      ) as [number, number];
      rows.push({ op: "cascade decode", b, sk: prefix + own, shared_prefix: prefix, kv_dtype: label(dc), block_size: BLOCK, threads: rt.threads, ms: msCascade, ms_paged: msPaged, cascade_over_paged: msCascade / msPaged });
      ctx.log(`  cascade b=${b} ${label(dc)}: ${msCascade.toFixed(3)} ms vs paged ${msPaged.toFixed(3)} ms`);
      plan.dispose();
      cplan.dispose();
      rt.free(q);
      rt.free(out);
      cache.dispose();
    }
  }
  return rows;
}

export const paged: Suite = {
  name: "paged",
  bothKernels: true,
  description: "pagedAttention decode: paged vs padded, KV dtypes and the int8 integer path, cascade; H=32 Hkv=8 D=128, block size 16",
  async run(ctx: SuiteContext): Promise<Row[]> {
    const { rt } = ctx;
    const c = ctx.ceilings;
    if (c.threads > 1 && c.simd_gflops_all < 1.5 * c.simd_gflops_1t) {
      ctx.log(
        `warning: all-thread SIMD throughput is only ${(c.simd_gflops_all / c.simd_gflops_1t).toFixed(2)}× one thread's: other processes share the cores; rows will not be representative`,
      );
    }
    const rows: Row[] = [];
    const minTime = ctx.quick ? 100 : 400;
    ctx.log("paged vs padded (f32, bf16), timed in alternating rounds…");
    for (const dt of ["f32", "bf16"] as const) {
      for (const { b, sk } of shapes(ctx.quick)) {
        const padded = paddedRunner(rt, b, sk, dt);
        const paged = pagedRunner(rt, b, sk, { kv_dtype: dt });
        const [msPaged, msPadded, msInOrder] = await ctx.timeInterleaved([paged.run, padded.run, paged.runInOrder!], minTime) as [number, number, number];
        const w = work(b, sk, dt, undefined);
        rows.push({
          op: "decode",
          b,
          sk,
          kv_dtype: dt,
          block_size: BLOCK,
          threads: rt.threads,
          ms: msPaged,
          ms_padded: msPadded,
          paged_over_padded: msPaged / msPadded,
          paged_in_order_over_padded: msInOrder / msPadded,
          ...roofline(w.flops, w.bytes, msPaged, c),
        });
        ctx.log(
          `  b=${b} sk=${sk} ${dt}: paged ${msPaged.toFixed(3)} ms (${paged.note}), padded BNSD ${msPadded.toFixed(3)} ms (${padded.note}): ${(msPaged / msPadded).toFixed(3)}; blocks in id order ${(msInOrder / msPadded).toFixed(3)}`,
        );
        paged.dispose();
        padded.dispose();
      }
    }
    ctx.log("KV dtypes, each timed in alternating rounds with f32…");
    for (const { b, sk } of shapes(ctx.quick)) {
      const f32 = pagedRunner(rt, b, sk, DTYPE_CASES[0]!);
      const f32Times: number[] = [];
      const measured: { dc: DtypeCase; ms: number; f32ms: number }[] = [];
      for (const dc of DTYPE_CASES.slice(1)) {
        const other = pagedRunner(rt, b, sk, dc);
        const [msF32, ms] = await ctx.timeInterleaved([f32.run, other.run], minTime) as [number, number];
        f32Times.push(msF32);
        measured.push({ dc, ms, f32ms: msF32 });
        ctx.log(`  b=${b} sk=${sk} ${label(dc)}: ${ms.toFixed(3)} ms, f32 ${msF32.toFixed(3)} ms: ${(msF32 / ms).toFixed(2)}× f32`);
        other.dispose();
      }
      f32.dispose();
      const f32ms = median(f32Times);
      const spread = (Math.max(...f32Times) - Math.min(...f32Times)) / f32ms;
      if (spread > 0.15) ctx.log(`  warning: b=${b} sk=${sk}: the f32 baseline moved by ${(100 * spread).toFixed(0)}% across pairings (contention)`);
      for (const { dc, ms, f32ms: pairF32 } of [{ dc: DTYPE_CASES[0]!, ms: f32ms, f32ms }, ...measured]) {
        const w = work(b, sk, dc.kv_dtype, dc.int8_scaling);
        rows.push({
          op: "decode",
          b,
          sk,
          kv_dtype: dc.kv_dtype,
          int8_scaling: dc.int8_scaling ?? null,
          int8_path: dc.int8_path ?? null,
          block_size: BLOCK,
          threads: rt.threads,
          ms,
          speedup_vs_f32: pairF32 / ms,
          ...roofline(w.flops, w.bytes, ms, c),
        });
      }
    }
    ctx.log("cascade (shared prefix)…");
    rows.push(...await cascadeRows(rt, ctx));
    return rows;
  },
};

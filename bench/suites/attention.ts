/**
 * Suite `attention`: decode (increFlashAttention with an AttentionPlan) and
 * causal prefill (flashAttention) at the sizes, on all threads and on
 * one, against the roofline measured in the same run:
 *
 *   roofline = max(bytes / read_bw, flops / simd_flops) / measured time
 *
 * with the ceilings of the row's thread count (ctx.ceilings *_all or *_1t).
 * flops = 4·D per (query head, kept key) (q·k and p·v, a mul and an add each);
 * bytes = K and V of the kept keys once, plus q and out.
 *
 * Shapes: H = 32, Hkv = 8, D = 128. Decode: B ∈ {1, 8, 32}, Sk ∈ {1024, 4096,
 * 16384}, f32 and bf16 caches (BNSD), one query per sequence. Prefill: B = 1,
 * S ∈ {512, 2048, 8192}, causal, f32 and bf16 K/V.
 *
 * A decode cache larger than MAX_CACHE_BYTES (B = 32, Sk = 16384: 4.3 GB in
 * f32, beyond wasm32's 4 GiB) is a batch-stride-0 view: every sequence reads
 * the same physical rows. One sequence's K/V (64–128 MiB here) is larger than
 * the 32 MiB L3 and is reread only after the other 7 KV heads' rows, so the
 * reads still come from DRAM; the rows say so in BENCHMARKS.md.
 *
 * Each decode call reads the next of several copies of the cache (a model's
 * layers), spanning ≥ 96 MB, so the KV of a call is never still in the L3.
 *
 * The float64 reference runs once for decode at B = 1 (all Sk) and prefill at
 * S = 512, giving speedup_vs_reference. Prefill's peak heap (inputs, outputs,
 * the op's own allocations, thread scratch) is logged for S = 2048 and 8192.
 */
import {
  AttentionPlan,
  type DType,
  type Runtime,
  Tensor,
  createRuntime,
  flashAttention,
  formatBytes,
  increFlashAttention,
  referenceFlashAttention,
  referenceIncreFlashAttention,
} from "../../src/ops-entry.js";
import type { Ceilings } from "../ceilings.js";
import type { Row, Suite, SuiteContext } from "../harness.js";

const H = 32;
const HKV = 8;
const D = 128;
/** Largest K (and V) buffer the suite allocates; larger caches become batch-stride-0 views. */
const MAX_CACHE_BYTES = 1.1e9;
/** Decode cycles through cache copies spanning at least this many bytes of K (and of V): > the 32 MiB L3. */
const LAYER_SPAN = 96e6;

interface Case {
  op: "decode" | "prefill";
  b: number;
  sk: number;
  kv_dtype: "f32" | "bf16";
}

function decodeCases(quick: boolean): Case[] {
  const cases: Case[] = [];
  for (const kv_dtype of ["f32", "bf16"] as const) {
    for (const b of quick ? [1, 8] : [1, 8, 32]) {
      for (const sk of quick ? [1024, 4096] : [1024, 4096, 16384]) cases.push({ op: "decode", b, sk, kv_dtype });
    }
  }
  return cases;
}

function prefillCases(quick: boolean): Case[] {
  const sizes = quick ? [512, 2048] : [512, 2048, 8192];
  return [...sizes.map((sk) => ({ op: "prefill" as const, b: 1, sk, kv_dtype: "f32" as const })), { op: "prefill", b: 1, sk: 2048, kv_dtype: "bf16" }];
}

const bytesOf = (dt: DType): number => (dt === "f32" ? 4 : 2);

/** FLOPs and bytes a case must spend and move (see the file comment). */
export function work(c: Case): { flops: number; bytes: number } {
  if (c.op === "decode") {
    return { flops: 4 * D * H * c.b * c.sk, bytes: 2 * c.b * HKV * c.sk * D * bytesOf(c.kv_dtype) + 2 * c.b * H * D * 4 };
  }
  const pairs = (c.sk * (c.sk + 1)) / 2; // causal: query i keeps keys 0..i
  return { flops: 4 * D * H * pairs, bytes: 2 * H * c.sk * D * 4 + 2 * HKV * c.sk * D * bytesOf(c.kv_dtype) };
}

/** Fills a (contiguous) f32 or bf16 tensor with a repeating pattern of small random values. */
function fill(t: Tensor, seed: number): Tensor {
  const values = new Float32Array(4099);
  let s = seed;
  for (let i = 0; i < values.length; i++) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    values[i] = s / 2 ** 32 - 0.5;
  }
  // bf16 codes: the high halves of the f32 values (truncation is fine for test data).
  const codes = t.dtype === "f32" ? values : Uint16Array.from(new Uint32Array(values.buffer), (bits) => bits >>> 16);
  const raw = t.dtype === "f32" ? new Float32Array(t.memory.buffer, t.ptr, t.numel) : new Uint16Array(t.memory.buffer, t.ptr, t.numel);
  for (let off = 0; off < raw.length; off += codes.length) {
    const n = Math.min(codes.length, raw.length - off);
    if (raw instanceof Float32Array) raw.set((codes as Float32Array).subarray(0, n), off);
    else raw.set((codes as Uint16Array).subarray(0, n), off);
  }
  return t;
}

function roofline(c: Case, ms: number, threads: number, ceil: Ceilings): { gflops: number; gbps: number; roofline: number } {
  const { flops, bytes } = work(c);
  const one = threads === 1;
  const simd = one ? ceil.simd_gflops_1t : ceil.simd_gflops_all;
  const bw = one ? ceil.read_gbps_1t : ceil.read_gbps_all;
  const bound = Math.max(bytes / (bw * 1e6), flops / (simd * 1e6)); // ms
  return { gflops: flops / (ms * 1e6), gbps: bytes / (ms * 1e6), roofline: bound / ms };
}

/** Decode rows for one runtime (all its threads). */
async function runDecode(rt: Runtime, cases: Case[], ctx: SuiteContext, reference: boolean): Promise<Row[]> {
  const rows: Row[] = [];
  for (const kv_dtype of ["f32", "bf16"] as const) {
    const mine = cases.filter((c) => c.kv_dtype === kv_dtype);
    if (mine.length === 0) continue;
    // One physical cache, sized for the largest case that fits; bigger cases view it with batch stride 0.
    const perSeq = (sk: number) => HKV * sk * D * bytesOf(kv_dtype);
    const physB = (c: Case) => (c.b * perSeq(c.sk) <= MAX_CACHE_BYTES ? c.b : 1);
    const cap = Math.max(...mine.map((c) => physB(c) * perSeq(c.sk)));
    const kBuf = fill(rt.tensor(kv_dtype, [cap / bytesOf(kv_dtype)], "bench k"), 1);
    const vBuf = fill(rt.tensor(kv_dtype, [cap / bytesOf(kv_dtype)], "bench v"), 2);
    for (const c of mine) {
      const shared = physB(c) !== c.b;
      const strides = [shared ? 0 : HKV * c.sk * D, c.sk * D, D, 1];
      // Successive calls read successive "layers" (copies of the cache at other
      // addresses), at least LAYER_SPAN bytes in all: as in a model, a layer's
      // K/V are not in the L3 when they are read again.
      const layerBytes = physB(c) * perSeq(c.sk);
      const layers = Math.max(1, Math.min(Math.floor(cap / layerBytes), Math.ceil(LAYER_SPAN / layerBytes)));
      const view = (buf: Tensor, l: number) => new Tensor(rt.memory, buf.ptr + l * layerBytes, kv_dtype, [c.b, HKV, c.sk, D], strides);
      const ks = Array.from({ length: layers }, (_, l) => view(kBuf, l));
      const vs = Array.from({ length: layers }, (_, l) => view(vBuf, l));
      const [k, v] = [ks[0]!, vs[0]!];
      const q = fill(rt.tensor("f32", [c.b, H, 1, D]), 3);
      const out = rt.tensor("f32", [c.b, H, 1, D]);
      const plan = AttentionPlan.create(rt, { actualSeqLengths: new Array<number>(c.b).fill(c.sk), numHeads: H, numKvHeads: HKV, headDim: D });
      let layer = 0;
      const ms = await ctx.time(
        () => {
          increFlashAttention(rt, { q, k: ks[layer]!, v: vs[layer]!, plan, out });
          layer = (layer + 1) % layers;
        },
        { minReps: 5, minTimeMs: ctx.quick ? 100 : 400 },
      );
      const row: Row = { op: c.op, b: c.b, sk: c.sk, kv_dtype, threads: rt.threads, ms, ...roofline(c, ms, rt.threads, ctx.ceilings) };
      if (reference && c.b === 1 && !ctx.quick) {
        const t0 = performance.now();
        referenceIncreFlashAttention({ q, k, v });
        row["speedup_vs_reference"] = (performance.now() - t0) / ms;
      }
      ctx.log(`  decode b=${c.b} sk=${c.sk} ${kv_dtype} threads=${rt.threads}: ${ms.toFixed(3)} ms over ${layers} layer${layers > 1 ? "s" : ""}${shared ? ", batch-stride-0 cache view" : ""}; plan: ${plan.reason}`);
      rows.push(row);
      plan.dispose();
      rt.free(q);
      rt.free(out);
    }
    rt.free(kBuf);
    rt.free(vBuf);
  }
  return rows;
}

/** Peak of heap.inUse while `fn` runs (wraps the allocator's alloc for the duration). */
function peakHeap(rt: Runtime, fn: () => void): number {
  const heap = rt.heap;
  const alloc = heap.alloc.bind(heap);
  let peak = heap.inUse;
  Object.defineProperty(heap, "alloc", {
    configurable: true,
    value: (bytes: number, label?: string, align?: number) => {
      const p = alloc(bytes, label, align);
      peak = Math.max(peak, heap.inUse);
      return p;
    },
  });
  try {
    fn();
  } finally {
    delete (heap as { alloc?: unknown }).alloc;
  }
  return peak;
}

async function runPrefill(rt: Runtime, cases: Case[], ctx: SuiteContext, reference: boolean): Promise<Row[]> {
  const rows: Row[] = [];
  for (const c of cases) {
    const S = c.sk;
    const big = S >= 8192;
    const before = rt.heap.inUse;
    const q = fill(rt.tensor("f32", [1, H, S, D]), 4);
    const k = fill(rt.tensor(c.kv_dtype, [1, HKV, S, D]), 5);
    const v = fill(rt.tensor(c.kv_dtype, [1, HKV, S, D]), 6);
    const out = rt.tensor("f32", [1, H, S, D]);
    const inputs = rt.heap.inUse - before;
    const run = () => flashAttention(rt, { q, k, v, causal: true, out });
    run(); // warm: allocates the per-thread scratch once
    // S = 8192 takes seconds a run (≈ 20 s on one thread): few reps there.
    const ms = await ctx.time(run, big ? { warmup: 0, minReps: rt.threads === 1 ? 1 : 3, minTimeMs: 0 } : { minReps: 3, minTimeMs: ctx.quick ? 200 : 1000 });
    const row: Row = { op: c.op, b: 1, sk: S, kv_dtype: c.kv_dtype, threads: rt.threads, ms, ...roofline(c, ms, rt.threads, ctx.ceilings) };
    if (reference && S === 512 && c.kv_dtype === "f32" && !ctx.quick) {
      const t0 = performance.now();
      referenceFlashAttention({ q, k, v, causal: true });
      row["speedup_vs_reference"] = (performance.now() - t0) / ms;
    }
    if (rt.threads > 1 && c.kv_dtype === "f32" && S >= 2048) {
      const base = rt.heap.inUse;
      const peak = peakHeap(rt, run);
      const scratch = rt.exports["attention_scratch_bytes"]!(D) * rt.threads;
      const scores = H * S * S * 4;
      ctx.log(
        `  prefill S=${S} memory: inputs+out ${formatBytes(inputs)}, op transient peak ${formatBytes(peak - base)}, ` +
          `thread scratch ${formatBytes(scratch)} (${rt.threads} threads, independent of S); an S×S score matrix would be ${formatBytes(scores)}`,
      );
    }
    ctx.log(`  prefill S=${S} ${c.kv_dtype} threads=${rt.threads}: ${ms.toFixed(1)} ms`);
    rows.push(row);
    for (const t of [q, k, v, out]) rt.free(t);
  }
  return rows;
}

export const attention: Suite = {
  name: "attention",
  bothKernels: true,
  description: "decode (increFlashAttention + AttentionPlan) and causal prefill (flashAttention), H=32 Hkv=8 D=128, all threads and one",
  async run(ctx: SuiteContext): Promise<Row[]> {
    const rows: Row[] = [];
    const c = ctx.ceilings;
    if (c.threads > 1 && c.simd_gflops_all < 1.5 * c.simd_gflops_1t) {
      ctx.log(
        `warning: all-thread SIMD throughput is only ${(c.simd_gflops_all / c.simd_gflops_1t).toFixed(2)}× one thread's ` +
          `(fork–join ${c.forkjoin_us.toFixed(1)} µs): other processes share the cores; multi-thread rows will not be representative`,
      );
    }
    ctx.log(`decode on ${ctx.rt.threads} threads…`);
    rows.push(...await runDecode(ctx.rt, decodeCases(ctx.quick), ctx, true));
    ctx.log(`prefill on ${ctx.rt.threads} threads…`);
    rows.push(...await runPrefill(ctx.rt, prefillCases(ctx.quick), ctx, true));
    if (ctx.rt.threads > 1) {
      const one = await createRuntime({ threads: 1, kernels: ctx.rt.kernels });
      try {
        ctx.log("decode on 1 thread…");
        rows.push(...await runDecode(one, decodeCases(ctx.quick), ctx, false));
        ctx.log("prefill on 1 thread…");
        rows.push(...await runPrefill(one, prefillCases(ctx.quick), ctx, false));
      } finally {
        await one.dispose();
      }
      for (const r of rows.filter((x) => x["threads"] === 1)) {
        const all = rows.find((x) => x["threads"] !== 1 && x["op"] === r["op"] && x["b"] === r["b"] && x["sk"] === r["sk"] && x["kv_dtype"] === r["kv_dtype"]);
        if (all) ctx.log(`  scaling ${r["op"]} b=${r["b"]} sk=${r["sk"]} ${r["kv_dtype"]}: ${((r["ms"] as number) / (all["ms"] as number)).toFixed(2)}× on ${ctx.rt.threads} threads`);
      }
    }
    return rows;
  },
};

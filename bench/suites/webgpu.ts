/**
 * Suite `webgpu`: the WGSL attention kernels (src/gpu/) on the WebGPU adapter
 * the machine has, against the GPU's own ceilings measured in the same run
 * (bench/gpu-ceilings.ts): bandwidth from a copy kernel, FMA peak from an
 * FMA kernel.
 *
 *   gbps     = bytes / time: K and V of the kept keys once, plus q and out
 *   gflops   = 4·D per (query head, kept key) / time (q·k and p·v)
 *   bw_frac  = gbps / copy_gbps;  fma_frac = gflops / fma_gflops
 *   roofline = max(bytes / copy bandwidth, flops / FMA peak) / time
 *
 * Operands are uploaded once (prepareAttentionOnGpu, FlashInfer's plan) and
 * each timing repeats only the kernels (queue.onSubmittedWorkDone), so
 * neither upload nor readback is in the times.
 *
 * Shapes: H = 32, Hkv = 8, D = 128 (Llama-3-8B-like): decode B = 1 over Sk ∈
 * {4096, 16384} with f32 and f16 caches, split in 512-key chunks
 * (FlashDecoding); causal prefill S ∈ {1024, 4096}, f16 K/V. --quick (and any
 * software adapter: SwiftShader runs on the CPU) takes H = 8, Hkv = 2 and
 * Sk = 1024 decode, S = 128 prefill: enough to show the suite runs, not a
 * speed. Rows name the adapter; BENCHMARKS.md says which runs were real GPUs.
 * Then the matrix rows (bench/webgpu-gemv.ts: decode GEMV and prefill GEMM
 * in bf16, f16, q8, Q4_K and Q6_K), the model rows (bench/webgpu-model.ts:
 * the WebGPU ModelRunner's prefill and decode tok/s, `over_cpu`, the ratio to
 * the wasm decoder, and the decode's fraction of the bandwidth roofline), and
 * the peer rows (bench/webgpu-peer.ts: llama.cpp's Vulkan backend on the same
 * GPU and GGUF file; skipped on a software adapter or without the Vulkan
 * build).
 */
import { prefillProblem } from "../../src/attention/flash-attention.js";
import { prepareIncreFlashAttention } from "../../src/attention/incre-flash-attention.js";
import { type GpuAttentionLaunch, prepareAttentionOnGpu } from "../../src/gpu/attention-run.js";
import { GpuDevice } from "../../src/gpu/device.js";
import { type DType, type Runtime, type Tensor, convert } from "../../src/ops-entry.js";
import { type GpuCeilings, adapterName, measureGpuCeilings, timeGpu } from "../gpu-ceilings.js";
import type { Row, Suite } from "../harness.js";
import { matrixRows } from "../webgpu-gemv.js";
import { modelRows } from "../webgpu-model.js";
import { peerRows } from "../webgpu-peer.js";

interface Case {
  op: "decode" | "prefill";
  kv: DType;
  H: number;
  Hkv: number;
  Sq: number;
  Sk: number;
  D: number;
}

function cases(small: boolean): Case[] {
  const [H, Hkv, D] = small ? [8, 2, 128] : [32, 8, 128];
  const decode = (small ? [1024] : [4096, 16384]).flatMap((Sk) => (small ? (["f16"] as const) : (["f32", "f16"] as const)).map((kv): Case => ({ op: "decode", kv, H, Hkv, Sq: 1, Sk, D })));
  const prefill = (small ? [128] : [1024, 4096]).map((S): Case => ({ op: "prefill", kv: "f16", H, Hkv, Sq: S, Sk: S, D }));
  // One layer of the model rows' decode (Qwen2.5-0.5B: 14 heads, 2 KV heads, D 64) at 576 keys, bf16 cache.
  const modelLayer: Case[] = small ? [] : [{ op: "decode", kv: "bf16", H: 14, Hkv: 2, Sq: 1, Sk: 576, D: 64 }];
  return [...decode, ...modelLayer, ...prefill];
}

/** A random tensor of `dtype` (f16/bf16 encoded from f32 by convert). */
function random(rt: Runtime, dtype: DType, shape: number[], seed: number): Tensor {
  const f = rt.tensor("f32", shape);
  const data = f.data() as Float32Array;
  let s = seed >>> 0;
  for (let i = 0; i < data.length; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    data[i] = s / 2 ** 31 - 1;
  }
  if (dtype === "f32") return f;
  const t = rt.tensor(dtype, shape);
  convert(rt, f, t);
  rt.free(f);
  return t;
}

function counts(c: Case): { bytes: number; flops: number; kept: number } {
  const kept = c.op === "decode" ? c.Sk : (c.Sq * (c.Sq + 1)) / 2; // keys per query head (causal: the triangle)
  const kvBytes = c.kv === "f32" ? 4 : 2;
  const bytes = 2 * c.Sk * c.Hkv * c.D * kvBytes + 2 * c.Sq * c.H * c.D * 4;
  return { bytes, flops: 4 * c.D * c.H * kept, kept };
}

async function measure(rt: Runtime, gpu: GpuDevice, c: Case, ceil: GpuCeilings, quick: boolean): Promise<Row> {
  const q = random(rt, "f32", [1, c.H, c.Sq, c.D], 1);
  const k = random(rt, c.kv, [1, c.Hkv, c.Sk, c.D], 2);
  const v = random(rt, c.kv, [1, c.Hkv, c.Sk, c.D], 3);
  let launch: GpuAttentionLaunch | null = null;
  const allocated: Tensor[] = [];
  let split = 1;
  try {
    if (c.op === "prefill") {
      const p = prefillProblem(rt, { q, k, v, causal: true });
      allocated.push(...p.allocated);
      launch = await prepareAttentionOnGpu(gpu, p, { q, k, v }, { bounds: p.seqs.map((s) => [0, s.sk]), table: null });
    } else {
      split = Math.max(1, Math.ceil(c.Sk / 512));
      const { p, plan } = prepareIncreFlashAttention(rt, { q, k, v, splitKv: split });
      allocated.push(...p.allocated);
      try {
        launch = await prepareAttentionOnGpu(gpu, p, { q, k, v }, { bounds: plan.chunkBounds, table: null });
      } finally {
        plan.dispose();
      }
    }
    const l = launch;
    const ms = await timeGpu(gpu, (pass) => l.encode(pass), quick ? 1 : 10, quick ? 3 : 7);
    const { bytes, flops } = counts(c);
    const gbps = bytes / (ms * 1e6);
    const gflops = flops / (ms * 1e6);
    const bound = Math.max(bytes / (ceil.copy_gbps * 1e6), flops / (ceil.fma_gflops * 1e6));
    return {
      adapter: adapterName(gpu),
      op: c.op === "decode" ? "increFlashAttention" : "flashAttention (causal)",
      kernel: l.kernel,
      kv: c.kv,
      B: 1,
      H: c.H,
      Hkv: c.Hkv,
      Sq: c.Sq,
      Sk: c.Sk,
      D: c.D,
      split,
      ms,
      gbps,
      gflops,
      bw_frac: gbps / ceil.copy_gbps,
      fma_frac: gflops / ceil.fma_gflops,
      roofline: bound / ms,
    };
  } finally {
    launch?.release();
    for (const t of [q, k, v, ...allocated]) rt.free(t);
  }
}

export const webgpu: Suite = {
  name: "webgpu",
  description: "WGSL FlashAttention-2 prefill and FlashDecoding decode on the WebGPU adapter, against its copy bandwidth and FMA peak measured in the same run; the WebGPU ModelRunner's prefill and decode tok/s over the wasm decoder's",
  async run({ rt, quick, log }): Promise<Row[]> {
    const gpu = (await GpuDevice.open({ device: "webgpu" }))!;
    try {
      log(gpu.describe());
      const small = quick || gpu.adapter.software;
      if (gpu.adapter.software) log("a software adapter: the rows show that the suite runs, not GPU speed");
      const ceil = await measureGpuCeilings(gpu, small);
      log(`ceilings: copy ${ceil.copy_gbps.toFixed(2)} GB/s, fma ${ceil.fma_gflops.toFixed(2)} GFLOP/s`);
      const rows: Row[] = [
        { adapter: adapterName(gpu), op: "copy (ceiling)", gbps: ceil.copy_gbps, software: gpu.adapter.software },
        { adapter: adapterName(gpu), op: "fma (ceiling)", gflops: ceil.fma_gflops, software: gpu.adapter.software },
      ];
      // Each case and part on its own: a failure is logged and the rows so far are kept (a lent GPU's minutes are few).
      const part = async (name: string, rowsOf: () => Promise<Row[]>): Promise<void> => {
        try {
          rows.push(...(await rowsOf()));
        } catch (e) {
          log(`${name} failed: ${(e as Error).stack ?? String(e)}`);
          rows.push({ adapter: adapterName(gpu), op: `${name} (failed)`, error: String((e as Error).message ?? e).slice(0, 300), software: gpu.adapter.software });
        }
        gpu.pool.clear();
      };
      for (const c of cases(small)) {
        log(`${c.op} ${c.kv} H=${c.H} Hkv=${c.Hkv} Sq=${c.Sq} Sk=${c.Sk} D=${c.D}`);
        await part(c.op, async () => [{ ...(await measure(rt, gpu, c, ceil, small)), software: gpu.adapter.software }]);
      }
      await part("matrix", () => matrixRows(gpu, ceil, small, log));
      await part("model", () => modelRows(rt, gpu, ceil, small, log));
      await part("peer", () => peerRows(rt, gpu, log));
      return rows;
    } finally {
      gpu.destroy();
    }
  },
};

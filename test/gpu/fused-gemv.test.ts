// Conformance of the matrix kernels' fusions (src/gpu/wgsl/gemv-tiling.ts
// xLoadsWgsl: the one x-load path of every GEMV; the write's residual add in
// the GEMVs and the tiled GEMM) against their float64 twins composed:
//   xNorm       linearReference(rmsNormReference(x, nw), W)
//   xGlu        linearReference(swigluReference / gegluReference(gate, up), W)
//   accumulate  out0 + linearReference(…) (+ bias)
// Weights f32 (97 columns: the scalar loads, x at offset 3), bf16 (96: the
// 16-byte loads), q8 (100: a partial last chunk read by x4m), Q4_K and Q6_K
// (quantized rows, 256 and 512 columns); 1 and 6 tokens (a token group of 4
// and a partial one); gate_up rows of 2·cols (+ 8 padding) for the GLU;
// outputs 9 wider than the rows, poisoned with NaN outside the written
// columns (they must stay NaN) and, without accumulate, inside too.
// The "subgroups off" pass opens a second device without the subgroups
// feature, so the RMSNorm's sum of squares takes the shared-memory tree
// (xLoadsWgsl) instead of subgroupAdd; SwiftShader has subgroups, so without
// it that path would run on no test machine. It checks the RMSNorm'd x only
// (the GLUs reduce nothing), on f32 and q8.
// Tolerance: |got − ref| ≤ 1e-5 · (Σ_c |x'·w| + Σ_c |x'|·|dmin·m| + |bias| + |out0|),
// x' the reference's fused input (f32 sums in another order, WGSL's exp and
// inverseSqrt a few ULP from float64).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ArgumentError } from "../../src/ops-entry.js";
import { GpuDecoderOps, type GpuGemvArgs, type GpuXLoad, packQ8Weight } from "../../src/gpu/decoder-ops.js";
import { GpuDevice } from "../../src/gpu/index.js";
import { decodeBlockRows } from "../../src/ops/reference/block-decode.js";
import { linearMagnitude, linearReference } from "../../src/ops/reference/linear.js";
import { rmsNormReference } from "../../src/ops/reference/rmsnorm.js";
import { gegluReference, swigluReference } from "../../src/ops/reference/swiglu.js";
import { quantize } from "../../src/sources/gguf/quantize.js";
import { decodeValue, encodeValue } from "../../src/tensor/codec.js";
import { randn, uniform } from "../helpers/random.js";
import { openTestGpu, runPass } from "./support.js";

const opened = await openTestGpu();
const gpuTest = (name: string, fn: () => Promise<void>) => test(name, { skip: opened.skip }, fn);

type Format = "f32" | "bf16" | "q8" | "q4_k" | "q6_k";
type Mode = "norm" | "swiglu" | "geglu" | "plain";
const EPS = 1e-6;

for (const variant of ["the adapter's features", "subgroups off"] as const) {
  const subgroupsOff = variant === "subgroups off";
  describe(`the GEMVs' fused x loads (RMSNorm, SwiGLU, GeGLU) and residual add against the float64 references, ${variant}`, () => {
    let gpu: GpuDevice;
    let ops: GpuDecoderOps;
    before(async () => {
      if (!opened.gpu) return;
      gpu = subgroupsOff ? (await GpuDevice.open({ device: "webgpu", disable: ["subgroups"] }))! : opened.gpu;
      assert.equal(gpu.features.has("subgroups"), subgroupsOff ? false : opened.gpu.features.has("subgroups"));
      ops = await GpuDecoderOps.create(gpu, subgroupsOff ? ["gemv f32", "gemv q8"] : ["gemv f32", "gemv q8", "gemv q4_k", "gemv q6_k", "gemm q8"]);
    });
    after(() => {
      ops?.dispose();
      if (subgroupsOff) gpu?.destroy();
      else opened.gpu?.destroy();
    });

    const upload = (data: ArrayLike<number>, label: string) => gpu.upload(new Uint8Array(Float32Array.from(data).buffer), label);
    const run = (record: (pass: GPUComputePassEncoder) => void, out: GPUBuffer, n: number) => runPass(gpu, ops, "a fused-gemv test", record, out, n);

    /** W [rows, cols] in `format`: the decoded values (and |dmin·m|), and how to record a product over it. */
    function weight(format: Format, rows: number, cols: number, seed: number) {
      if (format === "q4_k" || format === "q6_k") {
        const bytes = quantize(format === "q4_k" ? "Q4_K" : "Q6_K", randn(rows * cols, seed, 0.5), cols);
        const { values, offsets } = decodeBlockRows(format, bytes, rows, cols);
        const buffer = gpu.upload(bytes, format);
        return { values, offsets, buffers: [buffer], record: (pass: GPUComputePassEncoder, a: Omit<GpuGemvArgs, "weight" | "weightDtype">) => ops.gemvBlocks(pass, { ...a, weight: { buffer }, type: format }) };
      }
      const w = uniform(rows * cols, seed);
      if (format === "q8") {
        const q = packQ8Weight(w, rows, cols);
        const blocks = Math.ceil(cols / 32);
        const values = Float64Array.from({ length: rows * cols }, (_, i) => Math.fround(q.codes[Math.floor(i / cols) * blocks * 32 + (i % cols)]! * q.scales[Math.floor(i / cols) * blocks + Math.floor((i % cols) / 32)]!));
        const codes = gpu.upload(new Uint8Array(q.codes.buffer), "codes");
        const scales = upload(q.scales, "scales");
        return { values, offsets: null, buffers: [codes, scales], record: (pass: GPUComputePassEncoder, a: Omit<GpuGemvArgs, "weight" | "weightDtype">) => ops.gemvQ8(pass, { ...a, weight: { codes: { buffer: codes }, scales: { buffer: scales } } }) };
      }
      const codes = Array.from(w, (v) => (format === "f32" ? v : encodeValue(format, v)));
      const values = Float64Array.from(codes, (c) => (format === "f32" ? Math.fround(c) : decodeValue(format, c)));
      const buffer = gpu.upload(format === "f32" ? new Uint8Array(Float32Array.from(codes).buffer) : new Uint8Array(Uint16Array.from(codes).buffer), "w");
      return { values, offsets: null, buffers: [buffer], record: (pass: GPUComputePassEncoder, a: Omit<GpuGemvArgs, "weight" | "weightDtype">) => ops.gemv(pass, { ...a, weight: { buffer }, weightDtype: format }) };
    }

    /** The reference's fused input x' [tokens, cols] from the stored x rows (stride xStride, from element xOff). */
    function fusedInput(mode: Mode, x: Float32Array, xOff: number, xStride: number, tokens: number, cols: number, nw: Float32Array): Float64Array {
      const rows = Array.from({ length: tokens }, (_, t) => x.subarray(xOff + t * xStride, xOff + t * xStride + xStride));
      if (mode === "norm") return rmsNormReference(Float64Array.from(rows.flatMap((r) => Array.from(r.subarray(0, cols)))), nw, tokens, cols, EPS);
      if (mode === "plain") return Float64Array.from(rows.flatMap((r) => Array.from(r.subarray(0, cols))));
      const f = mode === "swiglu" ? swigluReference : gegluReference;
      return Float64Array.from(rows.flatMap((r) => Array.from(f(r.subarray(0, cols), r.subarray(cols, 2 * cols)))));
    }

    const CASES: { format: Format; cols: number; rows: number; xOff: number }[] = [
      { format: "f32", cols: 97, rows: 13, xOff: 3 },
      { format: "bf16", cols: 96, rows: 21, xOff: 0 },
      { format: "q8", cols: 100, rows: 9, xOff: 0 },
      { format: "q4_k", cols: 256, rows: 19, xOff: 0 },
      { format: "q6_k", cols: 512, rows: 10, xOff: 0 },
    ];
    for (const [k, { format, cols, rows, xOff }] of CASES.entries()) {
      if (subgroupsOff && format !== "f32" && format !== "q8") continue;
      const modes = subgroupsOff ? (["norm"] as const) : (["norm", "swiglu", "geglu", "plain"] as const);
      gpuTest(`${format}, ${rows} × ${cols}${xOff ? `, x at offset ${xOff}` : ""}: ${subgroupsOff ? "RMSNorm'd x" : "RMSNorm'd x, SwiGLU and GeGLU of gate_up rows"}, each with and without the residual add, 1 and 6 tokens`, async () => {
        const w = weight(format, rows, cols, 10 + k);
        const bias = uniform(rows, 20 + k);
        const nw = uniform(cols + 2, 30 + k, 0.5, 1.5);
        const bb = upload(bias, "bias");
        const nb = upload(nw, "norm weight");
        const [outStride, col0] = [rows + 9, 4];
        for (const tokens of [1, 6]) {
          for (const mode of modes) {
            for (const accumulate of mode === "plain" ? [true] : [false, true]) {
              const glu = mode === "swiglu" || mode === "geglu";
              const xStride = glu ? 2 * cols + 8 : cols;
              const x = uniform(xOff + tokens * xStride, 40 + tokens, -2, 2);
              const out0 = uniform(tokens * outStride, 50 + tokens);
              for (let t = 0; t < tokens; t++) for (const c of [0, col0 - 1, col0 + rows]) out0[t * outStride + c] = NaN;
              if (!accumulate) out0.fill(NaN);
              const xb = upload(x, "x");
              const ob = upload(out0, "out");
              const load: GpuXLoad = { ...(mode === "norm" ? { xNorm: { weight: { buffer: nb, offset: 2 }, eps: EPS } } : glu ? { xGlu: { act: mode === "swiglu" ? "silu" : "gelu_tanh", up: cols }, xStride } : {}), accumulate };
              const got = await run((pass) => w.record(pass, { x: { buffer: xb, offset: xOff }, out: { buffer: ob, offset: col0 }, outStride, bias: { buffer: bb }, tokens, rows, cols, ...load }), ob, tokens * outStride);
              const xf = fusedInput(mode, x, xOff, xStride, tokens, cols, nw.subarray(2));
              const shape = { tokens, rows, cols };
              const ref = linearReference(xf, w.values, shape, bias);
              const mag = linearMagnitude(xf, w.values, shape);
              const off = w.offsets ? linearMagnitude(xf.map(Math.abs), w.offsets, shape) : null;
              const what = `${format} ${mode}${accumulate ? " + residual" : ""} T=${tokens}`;
              for (let i = 0; i < tokens * rows; i++) {
                const [t, r] = [Math.floor(i / rows), i % rows];
                const base = accumulate ? out0[t * outStride + col0 + r]! : 0;
                const want = base + ref[i]!;
                const tol = 1e-5 * (mag[i]! + (off ? off[i]! : 0) + Math.abs(bias[r]!) + Math.abs(base));
                const g = got[t * outStride + col0 + r]!;
                if (!(Math.abs(g - want) <= tol)) assert.fail(`${what}: out[${t}, ${r}] = ${g}, reference ${want} (tolerance ${tol})`);
              }
              for (let t = 0; t < tokens; t++) for (const c of [0, col0 - 1, col0 + rows]) assert.ok(Number.isNaN(got[t * outStride + c]!), `${what}: wrote column ${c}`);
              for (const b of [xb, ob]) gpu.pool.release(b);
            }
          }
        }
        for (const b of [...w.buffers, bb, nb]) gpu.pool.release(b);
      });
    }

    if (subgroupsOff) return;
    gpuTest("the tiled GEMM's residual add (q8, 5 tokens, 37 × 64): out0 + x · Wᵀ + bias", async () => {
      const [tokens, rows, cols] = [5, 37, 64];
      const w = uniform(rows * cols, 60);
      const q = packQ8Weight(w, rows, cols);
      const values = Float64Array.from({ length: rows * cols }, (_, i) => Math.fround(q.codes[Math.floor(i / cols) * 64 + (i % cols)]! * q.scales[Math.floor(i / cols) * 2 + Math.floor((i % cols) / 32)]!));
      const x = uniform(tokens * cols, 61);
      const bias = uniform(rows, 62);
      const out0 = uniform(tokens * rows, 63);
      const [cb, sb, xb, bb, ob] = [gpu.upload(new Uint8Array(q.codes.buffer), "codes"), upload(q.scales, "scales"), upload(x, "x"), upload(bias, "bias"), upload(out0, "out")];
      const got = await run((pass) => ops.gemmQ8(pass, { x: { buffer: xb }, weight: { codes: { buffer: cb }, scales: { buffer: sb } }, out: { buffer: ob }, bias: { buffer: bb }, tokens, rows, cols, accumulate: true }), ob, tokens * rows);
      const shape = { tokens, rows, cols };
      const ref = linearReference(x, values, shape, bias);
      const mag = linearMagnitude(x, values, shape);
      for (let i = 0; i < tokens * rows; i++) {
        const want = out0[i]! + ref[i]!;
        const tol = 1e-5 * (mag[i]! + Math.abs(bias[i % rows]!) + Math.abs(out0[i]!));
        if (!(Math.abs(got[i]! - want) <= tol)) assert.fail(`gemm q8 + residual: out[${i}] = ${got[i]}, reference ${want} (tolerance ${tol})`);
      }
      for (const b of [cb, sb, xb, bb, ob]) gpu.pool.release(b);
    });

    gpuTest("refusals name the argument: a fusion on the GEMM, both fusions, a GLU's up inside the gate, out aliasing x, a bad act or eps", async () => {
      const b = gpu.pool.acquire(4096, "scratch");
      const o = gpu.pool.acquire(4096, "out");
      const q8 = { codes: { buffer: b }, scales: { buffer: b } };
      const a = { x: { buffer: b }, weight: q8, out: { buffer: o }, tokens: 1, rows: 4, cols: 32 };
      const enc = gpu.device.createCommandEncoder();
      const pass = enc.beginComputePass();
      const refused = (fn: () => void, re: RegExp) => assert.throws(fn, (e: Error) => e instanceof ArgumentError && re.test(e.message), String(re));
      refused(() => ops.gemmQ8(pass, { ...a, xNorm: { weight: { buffer: b }, eps: 1e-6 } }), /^xNorm applies to the GEMV only/);
      refused(() => ops.gemvQ8(pass, { ...a, xNorm: { weight: { buffer: b }, eps: 1e-6 }, xGlu: { act: "silu", up: 32 } }), /^xGlu and xNorm exclude each other/);
      refused(() => ops.gemvQ8(pass, { ...a, xGlu: { act: "silu", up: 16 }, xStride: 64 }), /^xGlu.up must be an integer ≥ cols 32 \(gate and up apart\), got 16/);
      refused(() => ops.gemvQ8(pass, { ...a, xGlu: { act: "relu" as "silu", up: 32 }, xStride: 64 }), /^xGlu.act must be "silu" or "gelu_tanh", got "relu"/);
      refused(() => ops.gemvQ8(pass, { ...a, xNorm: { weight: { buffer: b }, eps: -1 } }), /^xNorm.eps must be a number ≥ 0, got -1/);
      refused(() => ops.gemvQ8(pass, { ...a, out: { buffer: b } }), /^out must be a buffer other than x's/);
      refused(() => ops.gemvQ8(pass, { ...a, xStride: 31 }), /^xStride must be an integer ≥ cols 32, got 31/);
      pass.end();
      enc.finish();
      gpu.pool.release(b);
      gpu.pool.release(o);
    });
  });
}

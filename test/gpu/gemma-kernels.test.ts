// Conformance of the WGSL kernels Gemma's layers add (src/gpu/wgsl/decoder-ops.ts)
// against their float64 twins in src/ops/reference: GeGLU (tanh GELU) over
// the gate and up halves of gate_up rows, and the in-place maps scale
// (Gemma's embedding × √hidden) and softcap (Gemma 2's final logits), on
// awkward sizes (7 rows of 97 at a row stride of 197, 1003 elements at an
// element offset, and 65535 · 64 + 1001 elements: past one dispatch
// dimension, as 17 rows of logits of a 256000-token vocabulary are), with extreme and
// tiny inputs (±60 through the GELU's e^ clamp, the tanh's series below
// |y| = 1/16). Outputs are poisoned first: GeGLU's with NaN; around the
// in-place ranges, sentinels that must survive. Tolerances: GeGLU and softcap
// per element |got − ref| ≤ 1e-5 · max(1, |ref|) (WGSL's exp carries a few
// ULP more error than the reference's); scale is one f32 product, as on the
// CPU: bit-exact.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ArgumentError } from "../../src/ops-entry.js";
import { GpuDecoderOps } from "../../src/gpu/decoder-ops.js";
import type { GpuDevice } from "../../src/gpu/index.js";
import { gegluReference } from "../../src/ops/reference/swiglu.js";
import { softcapReference } from "../../src/ops/reference/softcap.js";
import { assertWithin, uniform } from "../helpers/random.js";
import { openTestGpu, runPass } from "./support.js";

const opened = await openTestGpu();
const gpuTest = (name: string, fn: () => Promise<void>) => test(name, { skip: opened.skip }, fn);
const SENTINEL = 12345.5;

describe("WebGPU Gemma kernels against the float64 references", () => {
  let gpu: GpuDevice;
  let ops: GpuDecoderOps;
  before(async () => {
    if (!opened.gpu) return;
    gpu = opened.gpu;
    ops = await GpuDecoderOps.create(gpu);
  });
  after(() => {
    ops?.dispose();
    opened.gpu?.destroy();
  });

  const upload = (data: ArrayLike<number>, label: string) => gpu.upload(new Uint8Array(Float32Array.from(data).buffer), label);
  const run = (record: (pass: GPUComputePassEncoder) => void, out: GPUBuffer, n: number) => runPass(gpu, ops, "a Gemma kernels test", record, out, n);
  /** `x` at element offset `off` of a buffer of sentinels (off before, 3 after). */
  const framed = (x: ArrayLike<number>, off: number) => upload([...new Array<number>(off).fill(SENTINEL), ...Array.from(x), SENTINEL, SENTINEL, SENTINEL], "x");
  function assertFrame(got: Float32Array, off: number, n: number, what: string): void {
    for (const i of [...Array.from({ length: off }, (_, i) => i), off + n, off + n + 1, off + n + 2]) assert.equal(got[i], SENTINEL, `${what}: element ${i} outside the range was written`);
  }

  gpuTest("GeGLU over 7 rows of 97 (gate and up halves of gate_up rows 197 apart), gates in [−8, 8] with ±60, ±1e−3 and 0, out poisoned with NaN", async () => {
    const [rows, n, stride] = [7, 97, 197];
    const gateUp = uniform(rows * stride, 41, -8, 8);
    [60, -60, 1e-3, -1e-3, 0, 5e-8].forEach((v, i) => (gateUp[i * 3] = v)); // row 0's gates: the e^ clamp, the tiny and zero
    const gate: number[] = [];
    const up: number[] = [];
    for (let r = 0; r < rows; r++) for (let i = 0; i < n; i++) (gate.push(gateUp[r * stride + i]!), up.push(gateUp[r * stride + n + i]!));
    const gb = upload(gateUp, "gate_up");
    const ob = upload(new Float32Array(5 + rows * n).fill(NaN), "out");
    const got = await run((pass) => ops.geglu(pass, { gate: { buffer: gb }, up: { buffer: gb, offset: n }, inStride: stride, out: { buffer: ob, offset: 5 }, n, rows }), ob, 5 + rows * n);
    assert.ok(got.subarray(0, 5).every(Number.isNaN), "elements before out were written");
    const ref = gegluReference(gate, up);
    assertWithin(got.subarray(5), ref, (i) => 1e-5 * Math.max(1, Math.abs(ref[i]!)), "geglu");
    for (const b of [gb, ob]) gpu.pool.release(b);
  });

  gpuTest("scale: 1003 elements at offset 5, × f32(√2304.5): bit-exact f32 products, nothing outside written", async () => {
    const [n, off, s] = [1003, 5, Math.fround(Math.sqrt(2304.5))];
    const x = uniform(n, 42, -3, 3);
    const xb = framed(x, off);
    const got = await run((pass) => ops.scale(pass, { x: { buffer: xb, offset: off }, n, s }), xb, off + n + 3);
    assertFrame(got, off, n, "scale");
    assert.deepEqual(Array.from(got.subarray(off, off + n)), Array.from(x, (v) => Math.fround(v * s)));
    gpu.pool.release(xb);
  });

  gpuTest("softcap: 1003 elements at offset 5, caps 30 and 3, values in [−200, 200] and within cap/16 of 0 (the tanh's series)", async () => {
    for (const [seed, cap] of [[43, 30], [44, 3]] as const) {
      const n = 1003;
      const off = 5;
      const x = uniform(n, seed, -200, 200);
      for (let i = 0; i < 300; i++) x[i] = Math.fround((cap / 16) * (2 * (i / 300) - 1) * (i % 2 ? 1 : 1e-3)); // |x / cap| < 1/16
      const xb = framed(x, off);
      const got = await run((pass) => ops.softcap(pass, { x: { buffer: xb, offset: off }, n, cap }), xb, off + n + 3);
      assertFrame(got, off, n, `softcap ${cap}`);
      const ref = softcapReference(x, cap);
      assertWithin(got.subarray(off, off + n), ref, (i) => 1e-5 * Math.max(1, Math.abs(ref[i]!)), `softcap ${cap}`);
      gpu.pool.release(xb);
    }
  });

  gpuTest("scale over 65535 · 64 + 1001 elements (a two-dimensional dispatch, the kernel template softcap shares): every element", async () => {
    const n = 65535 * 64 + 1001;
    const s = 3;
    const x = Float32Array.from({ length: n }, (_, i) => (i % 4099) - 2049.25);
    const xb = framed(x, 1);
    const got = await run((pass) => ops.scale(pass, { x: { buffer: xb, offset: 1 }, n, s }), xb, n + 4);
    assertFrame(got, 1, n, "scale");
    for (let i = 0; i < n; i++) if (got[1 + i] !== Math.fround(x[i]! * s)) assert.fail(`scale 2-D: element ${i} = ${got[1 + i]}, expected ${Math.fround(x[i]! * s)}`);
    gpu.pool.release(xb);
  });

  gpuTest("bad arguments are refused by name before anything is recorded", async () => {
    const b = upload(new Float32Array(8), "b");
    const enc = gpu.device.createCommandEncoder();
    const pass = enc.beginComputePass();
    const refused = (f: () => void, re: RegExp) => assert.throws(f, (e: Error) => e instanceof ArgumentError && re.test(e.message));
    refused(() => ops.softcap(pass, { x: { buffer: b }, n: 8, cap: 0 }), /^cap must be a finite number > 0, got 0$/);
    refused(() => ops.softcap(pass, { x: { buffer: b }, n: 8, cap: Infinity }), /^cap must be a finite number > 0, got Infinity$/);
    refused(() => ops.scale(pass, { x: { buffer: b }, n: 8, s: NaN }), /^s must be a finite number, got NaN$/);
    refused(() => ops.scale(pass, { x: { buffer: b }, n: 0, s: 2 }), /^n must be an integer ≥ 1, got 0$/);
    const words = b.size / 4; // the pool's size class: at least 8
    refused(() => ops.scale(pass, { x: { buffer: b, offset: 1 }, n: words, s: 2 }), new RegExp(`^x needs ${b.size + 4} bytes \\(offset 1 \\+ ${words} elements\\), its buffer has ${b.size}$`));
    refused(() => ops.geglu(pass, { gate: { buffer: b }, up: { buffer: b }, out: { buffer: b }, n: 4 }), /^out must be a buffer other than gate's and up's/);
    pass.end();
    enc.finish();
    gpu.pool.release(b);
  });
});

/**
 * The embed suite's roofline terms (bench/suites/embed.ts): FLOPs of an
 * encoder's projections, and a timer of kvflash's projections alone.
 *
 * FLOPs are counted as 2 · rows · cols per token and weight (a multiply-add
 * is two): per token and layer the fused Q/K/V [3h, h], the output [h, h],
 * the up [I, h] and the down [h, I] projections; for MiniLM-L6 (h 384,
 * I 1536, 6 layers) 21.2 MFLOP a token. kvflash computes the batch's ragged
 * tokens, onnxruntime the padded B × S_max. Attention's 4 · n² · h a sequence
 * and layer (under 1.5 % here: n ≤ 32) and the norms and GELU are not counted,
 * so a rate here is a lower bound of the work done per second.
 *
 * ProjectionTimer runs the 4 · layers linear() calls of one forward on T
 * tokens of activations allocated once (random values in [−1, 1)), the same
 * kernels and threads as BertEncoder.forward (src/model/encoder/bert-encoder.ts).
 */
import { linear } from "../src/ops/linear.js";
import type { Runtime } from "../src/runtime/runtime.js";
import type { BertWeights } from "../src/model/encoder/bert-weights.js";
import { Prng } from "../src/tensor/prng.js";
import type { Tensor } from "../src/tensor/tensor.js";

/** FLOPs of one token through every layer's projections. */
export function projectionFlopsPerToken(weights: BertWeights): number {
  let f = 0;
  for (const w of weights.layers) for (const m of [w.qkv, w.o, w.up, w.down]) f += 2 * m.rows * m.cols;
  return f;
}

export class ProjectionTimer {
  readonly #rt: Runtime;
  readonly #weights: BertWeights;
  readonly #bufs: Tensor[];

  /** Activations for T tokens: x, att, o [T, h], qkv [T, 3h], up [T, I]. */
  constructor(rt: Runtime, weights: BertWeights, T: number) {
    const l = weights.layers[0]!;
    if (l.up.rows !== l.down.cols) throw new Error(`ProjectionTimer takes a GELU MLP (up rows = down cols), got up [${l.up.rows}, ${l.up.cols}], down [${l.down.rows}, ${l.down.cols}]`);
    this.#rt = rt;
    this.#weights = weights;
    const rng = new Prng(5);
    this.#bufs = [l.o.cols, l.o.cols, l.o.cols, l.qkv.rows, l.up.rows].map((cols, i) => {
      const t = rt.tensor("f32", [T, cols], `embed bench projections ${i}`);
      const a = new Float32Array(rt.memory.buffer, t.ptr, T * cols);
      for (let j = 0; j < a.length; j++) a[j] = 2 * rng.nextFloat() - 1;
      return t;
    });
  }

  /** One forward's projections, as BertEncoder.forward calls them (x → qkv, att → o, x → up, up → o), biases included. */
  run(): void {
    const [x, att, o, qkv, up] = this.#bufs as [Tensor, Tensor, Tensor, Tensor, Tensor];
    const rt = this.#rt;
    const bias = (t: Tensor | null): { bias?: Tensor } => (t === null ? {} : { bias: t });
    for (const w of this.#weights.layers) {
      linear(rt, { x, weight: w.qkv, out: qkv, ...bias(w.qkvBias) });
      linear(rt, { x: att, weight: w.o, out: o, ...bias(w.oBias) });
      linear(rt, { x, weight: w.up, out: up, ...bias(w.upBias) });
      linear(rt, { x: up, weight: w.down, out: o, ...bias(w.downBias) });
    }
  }

  free(): void {
    for (const t of this.#bufs) this.#rt.free(t);
  }
}

/**
 * Suite `serve-bound`: what forward() alone allows the serve bench (was
 * tools/serve-bound.mjs). The serve suite's workload (distinct 32-token
 * prompts, 32 output tokens; BENCHMARKS.md "serve") as bare forward() calls
 * on synthetic Qwen2.5-0.5B shapes, q8 weights, bf16 KV: P1 = one 32-token
 * prefill, g1 = a decode step of one sequence, P16 = 16 prompts in one
 * 512-token step, g16 = a decode step of 16 sequences; medians over rounds
 * after one warm-up round. With no engine cost beyond forward(), a request
 * takes P1 + 32·g1 at concurrency 1 and (P16 + 32·g16) / 16 at 16: their
 * ratio bounds the serve speed-up at 16 (`bound_c16_speedup`).
 */
import type { ForwardBatch } from "../../src/ops-entry.js";
import { createSyntheticModel, qwen25HalfBConfig } from "../../src/testing/index.js";
import { type Row, type Suite, median } from "../harness.js";

const C = 16;
const P = 32;
const S = 32;
const BLOCK = 16;
const NB_SEQ = Math.ceil((P + S + 2) / BLOCK);

/** Sequences `seqs` (their own blocks: q·NB_SEQ …) each with n new tokens at positions start … start+n−1. */
function batch(seqs: readonly number[], start: number, n: number, vocab: number): ForwardBatch {
  const T = seqs.length * n;
  const b: ForwardBatch = {
    tokens: new Int32Array(T),
    positions: new Int32Array(T),
    cuSeqlensQ: new Int32Array(seqs.length + 1),
    seqLens: new Int32Array(seqs.length),
    blockTable: new Int32Array(seqs.length * NB_SEQ),
    maxBlocksPerSeq: NB_SEQ,
    slotMapping: new Int32Array(T),
    logitIndices: new Int32Array(seqs.length),
  };
  seqs.forEach((q, s) => {
    for (let i = 0; i < n; i++) {
      const t = s * n + i;
      b.tokens[t] = (((q + 1) * 7919 + (start + i) * 2654435761) % vocab) >>> 0;
      b.positions[t] = start + i;
      b.slotMapping[t] = q * NB_SEQ * BLOCK + start + i;
    }
    for (let k = 0; k < NB_SEQ; k++) b.blockTable[s * NB_SEQ + k] = q * NB_SEQ + k;
    b.cuSeqlensQ[s + 1] = (s + 1) * n;
    b.seqLens[s] = start + n;
    b.logitIndices[s] = (s + 1) * n - 1;
  });
  return b;
}

export const serveBound: Suite = {
  name: "serve-bound",
  description: "forward-only bound on the serve bench's speed-up at concurrency 16 (q8 Qwen2.5-0.5B shapes, bf16 KV): P1, g1, P16, g16 ms",
  run({ rt, quick, log }): Row[] {
    const rounds = quick ? 1 : 3;
    const model = createSyntheticModel(rt, { config: qwen25HalfBConfig(), weights: "q8", kvDtype: "bf16", numBlocks: C * NB_SEQ + 1, maxBatchTokens: C * P });
    try {
      const V = model.vocabSize;
      const all = Array.from({ length: C }, (_, i) => i);
      const time = (b: ForwardBatch): number => {
        const t0 = performance.now();
        model.forward(b);
        return performance.now() - t0;
      };
      const m = { P1: [] as number[], g1: [] as number[], P16: [] as number[], g16: [] as number[] };
      for (let r = 0; r < rounds + 1; r++) {
        const p1 = time(batch([0], 0, P, V));
        const g1 = Array.from({ length: 8 }, (_, i) => time(batch([0], P + i, 1, V)));
        const p16 = time(batch(all, 0, P, V));
        const g16 = Array.from({ length: 8 }, (_, i) => time(batch(all, P + i, 1, V)));
        if (r === 0) continue;
        m.P1.push(p1);
        m.g1.push(...g1);
        m.P16.push(p16);
        m.g16.push(...g16);
      }
      const [P1, g1, P16, g16] = [median(m.P1), median(m.g1), median(m.P16), median(m.g16)];
      const one = P1 + S * g1;
      const sixteen = P16 / C + (S * g16) / C;
      log(`serve-bound: P1 ${P1.toFixed(1)} ms, g1 ${g1.toFixed(2)} ms, P16 ${P16.toFixed(1)} ms, g16 ${g16.toFixed(2)} ms`);
      return [{
        concurrency: C, prompt_tokens: P, output_tokens: S,
        p1_ms: P1, g1_ms: g1, p16_ms: P16, g16_ms: g16,
        request_ms_c1: one, request_ms_c16: sixteen,
        bound_c16_speedup: one / sixteen, decode_only_speedup: (g1 * C) / g16,
        prefill_ms_per_token_c1: P1 / P, prefill_ms_per_token_c16: P16 / C / P,
      }];
    } finally {
      model.dispose();
    }
  },
};

/**
 * Suite `embed` (issue #26's benchmark): sentences per second of an
 * all-MiniLM-L6-v2-shaped encoder (BertModel, hidden 384, 12 heads, 6 layers,
 * MLP 1536, vocabulary 30522; random f32 weights, writeTinyBert) with mean
 * pooling and normalization, for batches of 1, 16 and 256 short inputs
 * (8–32 tokens with [CLS] and [SEP]), against onnxruntime-node — what
 * transformers.js runs in Node — on the same weights: the ONNX graph is built
 * by tools/embed-onnx/build_bert_onnx.py (Debian's python3-onnx), padded to
 * the batch's longest input with an attention mask as transformers.js pads,
 * mean-pooled and normalized in JS as its feature-extraction pipeline does.
 *
 * Both sides get the same token ids (tokenizing is not timed) and the same
 * threads (onnxruntime's intra-op threads = the runtime's). Rounds alternate
 * the two so that load drifting on the shared machine hits both alike; each
 * row gives medians and the ratio kvflash / onnxruntime (≥ 1: kvflash faster),
 * and `max_abs_diff` between the two sides' vectors (a second oracle). The
 * `q8_*` columns are kvflash with `--weights q8` (int8 weights, activations
 * quantized per block of 32 as GGUF Q8_0) in the same rounds: not the same
 * arithmetic as onnxruntime's f32, so its `q8_cosine_min` (the least cosine
 * to onnxruntime's vector) says what the speed costs.
 *
 * The roofline, in the same rounds: each round also runs the flavor's SIMD
 * f32 peak probe on all threads (ceilings.ts SimdProbe: FMA on the relaxed
 * flavor, mul + add on the baseline) and kvflash's projections alone on the
 * batch's tokens (embed-projections.ts). The roofline columns are per core:
 * FLOPs over the process's CPU time (process.cpuUsage, every thread: the
 * runtime's workers and onnxruntime's pool alike, spinning included), since
 * on the shared machine the wall time of a long run counts the time slices
 * other processes took, a short probe's does not. Per row: `ceiling_gflops_core`
 * (median probe), `kvflash_proj_gflops_core` / `kvflash_proj_frac`
 * (projection FLOPs of the ragged tokens over the projections' own CPU time),
 * `onnxruntime_gflops_core` / `onnxruntime_frac` (projection FLOPs of the
 * PADDED tokens it computes over its whole forward's CPU time: a lower bound
 * of its rate) and `parity_frac`: the fraction of the ceiling kvflash's
 * projections alone (ragged tokens) would have to run at to take no more CPU
 * time than onnxruntime's whole forward. Above 1, no wasm kernel of this
 * flavor reaches 1.0× at f32 on this machine with the same threads.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { loadEncoderModel } from "../../src/model/encoder/encoder-model.js";
import { Prng } from "../../src/tensor/prng.js";
import { writeTinyBert } from "../../src/testing/tiny-bert.js";
import { SimdProbe } from "../ceilings.js";
import { ProjectionTimer, projectionFlopsPerToken } from "../embed-projections.js";
import type { Row, Suite, SuiteContext } from "../harness.js";

const MINILM = { hiddenSize: 384, numHeads: 12, numLayers: 6, intermediateSize: 1536, maxPositionEmbeddings: 512, vocabSize: 30522 };
const SCRIPT = fileURLToPath(new URL("../../../tools/embed-onnx/build_bert_onnx.py", import.meta.url));
const PYTHON = "/usr/bin/python3";

/** Where .ci/onnxruntime.sh (`npm run onnxruntime:install`) puts the peer; it is not a dependency. */
const ORT_MODULES = fileURLToPath(new URL("../../../.ci/cache/onnxruntime/package.json", import.meta.url));

/** The part of onnxruntime-node's API this bench calls (its own types are not installed with the repo). */
interface OrtTensor {
  readonly data: unknown;
}
interface OrtSession {
  run(feeds: Record<string, OrtTensor>): Promise<Record<string, OrtTensor>>;
  release(): Promise<void>;
}
interface Ort {
  Tensor: new (type: "int64", data: BigInt64Array, dims: readonly number[]) => OrtTensor;
  InferenceSession: {
    create(path: string, options: { intraOpNumThreads: number; interOpNumThreads: number; executionMode: "sequential"; graphOptimizationLevel: "all" }): Promise<OrtSession>;
  };
}

/** Short inputs: [CLS] + 6–30 random word ids + [SEP]. */
function shortInputs(n: number, vocab: number, rng: Prng): number[][] {
  return Array.from({ length: n }, () => [2, ...Array.from({ length: 6 + rng.nextInt(25) }, () => 200 + rng.nextInt(vocab - 200)), 3]);
}

/** transformers.js's feature extraction: padded int64 inputs → last_hidden_state → masked mean → L2 normalize. */
async function ortEmbed(ort: Ort, session: OrtSession, seqs: readonly number[][], h: number): Promise<Float32Array[]> {
  const B = seqs.length;
  const S = Math.max(...seqs.map((s) => s.length));
  const ids = new BigInt64Array(B * S);
  const mask = new BigInt64Array(B * S);
  seqs.forEach((s, b) => s.forEach((id, i) => ((ids[b * S + i] = BigInt(id)), (mask[b * S + i] = 1n))));
  const feeds = {
    input_ids: new ort.Tensor("int64", ids, [B, S]),
    attention_mask: new ort.Tensor("int64", mask, [B, S]),
    token_type_ids: new ort.Tensor("int64", new BigInt64Array(B * S), [B, S]),
  };
  const out = (await session.run(feeds))["last_hidden_state"]!.data as Float32Array;
  return seqs.map((s, b) => {
    const v = new Float32Array(h);
    for (let i = 0; i < s.length; i++) for (let j = 0; j < h; j++) v[j]! += out[(b * S + i) * h + j]!;
    let n = 0;
    for (let j = 0; j < h; j++) n += (v[j]! /= s.length) ** 2;
    const inv = 1 / Math.max(Math.sqrt(n), 1e-12);
    return v.map((x) => x * inv);
  });
}

/** CPU ms of the whole process (every thread), user + system. */
const cpuMs = (): number => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function loadOrt(log: (line: string) => void): Promise<Ort | null> {
  try {
    return createRequire(ORT_MODULES)("onnxruntime-node") as Ort;
  } catch (e) {
    log(`  onnxruntime-node is not installed (npm run onnxruntime:install puts it in ${ORT_MODULES}): ${(e as Error).message}`);
    return null;
  }
}

export const embed: Suite = {
  name: "embed",
  description: "all-MiniLM-L6-v2-shaped encoder (random weights), mean pooling: sequences/s at batch 1, 16, 256 against onnxruntime-node on the same ONNX graph",
  async run(ctx: SuiteContext): Promise<Row[]> {
    const { rt, quick, log } = ctx;
    const dir = mkdtempSync(join(tmpdir(), "kvflash-bench-embed-"));
    try {
      log("  writing an all-MiniLM-L6-v2-shaped model (random f32 weights)…");
      writeTinyBert({ dir, ...MINILM, pooling: "mean", normalize: true, seed: 7, weightScale: 0.05 });
      const model = loadEncoderModel(rt, dir);
      const q8 = loadEncoderModel(rt, dir, { weights: "q8" });
      const ort = await loadOrt(log);
      let session: OrtSession | null = null;
      let why = "";
      if (ort !== null) {
        const onnx = join(dir, "model.onnx");
        const built = spawnSync(PYTHON, [SCRIPT, dir, onnx], { encoding: "utf8" });
        if (built.status === 0) {
          session = await ort.InferenceSession.create(onnx, { intraOpNumThreads: rt.threads, interOpNumThreads: 1, executionMode: "sequential", graphOptimizationLevel: "all" });
        } else {
          why = `the ONNX graph was not built (${PYTHON} ${SCRIPT}: ${(built.stderr || built.error?.message || "").trim().split("\n").pop()}; apt-get install python3-onnx)`;
          log(`  ${why}`);
        }
      } else why = "onnxruntime-node is not installed (npm run onnxruntime:install)";
      const rng = new Prng(11);
      const rows: Row[] = [];
      const probe = new SimdProbe(rt, 100_000); // ≈ 10 MFLOP an item: a few ms a round on all threads
      const flopsPerToken = projectionFlopsPerToken(model.encoder.weights);
      for (const batch of [1, 16, 256]) {
        const seqs = shortInputs(batch, MINILM.vocabSize, rng);
        const tokens = seqs.reduce((n, s) => n + s.length, 0);
        const padded = batch * Math.max(...seqs.map((s) => s.length));
        const projections = new ProjectionTimer(rt, model.encoder.weights, tokens);
        const ours = model.embed(seqs);
        const oursQ8 = q8.embed(seqs);
        let diff: number | null = null;
        let q8Cos: number | null = null;
        if (session !== null) {
          const theirs = await ortEmbed(ort!, session, seqs, MINILM.hiddenSize);
          diff = Math.max(...ours.map((v, b) => Math.max(...Array.from(v, (x, j) => Math.abs(x - theirs[b]![j]!)))));
          q8Cos = Math.min(...oursQ8.map((v, b) => v.reduce((s, x, j) => s + x * theirs[b]![j]!, 0))); // both unit vectors
        }
        const tK: number[] = [];
        const tQ: number[] = [];
        const tO: number[] = [];
        const cO: number[] = [];
        const cP: number[] = [];
        const cC: number[] = [];
        const minMs = quick ? 300 : 1500;
        const minRounds = quick ? 2 : 5;
        let spent = 0;
        for (let r = 0; r < minRounds || spent < minMs; r++) {
          const t0 = performance.now();
          model.embed(seqs);
          const t1 = performance.now();
          tK.push(t1 - t0);
          if (session !== null) {
            const c1 = cpuMs();
            await ortEmbed(ort!, session, seqs, MINILM.hiddenSize);
            tO.push(performance.now() - t1);
            cO.push(cpuMs() - c1);
          }
          const t2 = performance.now();
          q8.embed(seqs);
          tQ.push(performance.now() - t2);
          const c3 = cpuMs();
          projections.run();
          const c4 = cpuMs();
          cP.push(c4 - c3);
          probe.runAllThreads();
          cC.push(cpuMs() - c4);
          spent += performance.now() - t0;
          if (r > 200) break;
        }
        projections.free();
        const kv = (1000 * batch) / median(tK);
        const ceiling = probe.gflops(median(cC), true); // all threads' FLOPs over their CPU ms: per core
        const projGflops = (flopsPerToken * tokens) / (median(cP) * 1e6);
        const ortGflops = session === null ? null : (flopsPerToken * padded) / (median(cO) * 1e6);
        const r3 = (x: number): number => Math.round(x * 1000) / 1000;
        const onnx = session === null ? null : (1000 * batch) / median(tO);
        const row: Row = {
          batch,
          tokens,
          kvflash_seq_s: Math.round(kv * 10) / 10,
          onnxruntime_seq_s: onnx === null ? null : Math.round(onnx * 10) / 10,
          ratio: onnx === null ? null : Math.round((kv / onnx) * 100) / 100,
          kvflash_ms: Math.round(median(tK) * 10) / 10,
          onnxruntime_ms: session === null ? null : Math.round(median(tO) * 10) / 10,
          max_abs_diff: diff,
          q8_seq_s: Math.round(((1000 * batch) / median(tQ)) * 10) / 10,
          q8_ratio: onnx === null ? null : Math.round(((1000 * batch) / median(tQ) / onnx) * 100) / 100,
          q8_cosine_min: q8Cos === null ? null : Math.round(q8Cos * 1e7) / 1e7,
          padded_tokens: padded,
          ceiling_op: probe.op,
          ceiling_gflops_core: Math.round(ceiling * 10) / 10,
          kvflash_proj_gflops_core: Math.round(projGflops * 10) / 10,
          kvflash_proj_frac: r3(projGflops / ceiling),
          onnxruntime_gflops_core: ortGflops === null ? null : Math.round(ortGflops * 10) / 10,
          onnxruntime_frac: ortGflops === null ? null : r3(ortGflops / ceiling),
          parity_frac: session === null ? null : r3((flopsPerToken * tokens) / (median(cO) * 1e6) / ceiling),
          rounds: tK.length,
          threads: rt.threads,
          ...(session === null ? { note: why } : {}),
        };
        log(`  batch ${batch}: kvflash ${row.kvflash_seq_s} seq/s (q8 ${row.q8_seq_s}), onnxruntime ${row.onnxruntime_seq_s ?? "—"} seq/s (max |Δ| ${diff ?? "—"}, q8 cosine ≥ ${q8Cos ?? "—"})`);
        log(`    per core (CPU time): ${probe.op} ceiling ${row.ceiling_gflops_core} GFLOP/s; projections: kvflash ${row.kvflash_proj_gflops_core} (${row.kvflash_proj_frac}), onnxruntime ≥ ${row.onnxruntime_gflops_core ?? "—"} over ${padded} padded tokens (${row.onnxruntime_frac ?? "—"}); parity needs ${row.parity_frac ?? "—"} of the ceiling`);
        rows.push(row);
      }
      probe.free();
      model.dispose();
      q8.dispose();
      await session?.release();
      return rows;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  },
};

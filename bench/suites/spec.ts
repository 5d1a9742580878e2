/**
 * Suite `spec`: speculative decoding by prompt lookup (vLLM's `ngram`) and by a draft model against
 * plain decoding, through the Engine (scheduler, verification, sampler), greedy.
 * Each row times one workload with and without speculation, the two runs
 * alternated round by round (the machine is shared: ratios from one process,
 * medians over rounds), and reports:
 *
 *   acceptance   accepted drafts / proposed drafts (vLLM's draft acceptance rate)
 *   tok_s        generated tokens per second of the speculating engine
 *   over_plain   tok_s over the plain engine's on the same workload
 *   draft_cost   the cost of one draft in plain steps, k = 1/2/3/4, that the
 *                adaptive draft length weighed at the end of the last
 *                speculating run (the assumed DRAFT_TOKEN_COST, or measured
 *                with EngineOptions.stepClock, step-cost.ts; plus a draft
 *                model's forward)
 *   decode_over_plain  the same ratio over the decode phase alone: from when
 *                every request of a batch has its first token (its prefill
 *                done) to the end, tokens after the first (decode_tok_s,
 *                plain_decode_tok_s)
 *
 * Workloads:
 * - `context_copy` (default model, trained): a second turn that asks the first
 *   turn's question again, with the model's own first answer in the context —
 *   an answer copied from the conversation, as retrieval and edit workloads copy.
 * - `define` (default model): "What is a W?" for held-out WordNet nouns: free
 *   generation, drafts only where the answer repeats itself.
 * - `free` (Qwen2.5-0.5B-shaped, q8, random weights): nothing to copy; shows
 *   what proposing and adaptivity cost when drafts are (almost) never right,
 *   with prompt_lookup_min 2 and with 1 (a one-token match nearly every step).
 * - batch rows: 16 `define` streams at once, speculation on by default (off at
 *   disable_by_batch_size 8) and forced on (disable_by_batch_size 64).
 * - draft rows (method `draft`, vLLM's draft_model), batch 1, with a draft
 *   model beside the default model, two pairs of trained weights: the default
 *   model drafting for itself (acceptance's upper bound; the draft costs what
 *   the target does, so it cannot be faster) and its first 2 of 4 layers as an
 *   early-exit draft (early-exit-draft.ts; no early-exit training). "forced":
 *   draftCost 0, drafts every step; "adaptive": the default draftCost (the
 *   parameter ratio), which the adaptive draft length weighs.
 * - weight-bound rows (model `default inflated to qwen2.5-0.5b shapes, q8`): the
 *   default model widened and deepened by zero padding to Qwen2.5-0.5B's layer
 *   shapes (inflated-model.ts: it computes the default model's function; 362 M
 *   parameters, 407 MB read a step at q8), so verifying 1 + k tokens costs about
 *   one weight read: ngram `context_copy` and `define` at batch 1, `define` at 16
 *   streams (default cutoff and forced), and the default model itself (q8)
 *   drafting for it, forced and adaptive. The pair computes one function, so its
 *   acceptance is an upper bound: it measures the draft machinery on a
 *   weight-bound target, not a realistic pair. Then a pair of two functions: the
 *   default model's early exit (its first 2 of 4 layers, q8) drafting for it on
 *   `define` (forced, adaptive) and `context_copy` (adaptive).
 *   `KVFLASH_SPEC_ROWS=weight-bound` runs these rows alone. The default model answers these
 *   held-out nouns with one refusal that repeats no 2-gram, so `define` with
 *   prompt_lookup_min 2 proposes nothing; with 1 it proposes drafts that are
 *   rejected. The 16-stream rows run `define` with prompt_lookup_min 1 (the
 *   copy prompts' prefill would cost more than their answers on 2 cores).
 * - sampled rows (`temperature` 1, seeded requests): the default model drafting
 *   for itself with greedy drafts (argmax, a point mass q) and with sampled
 *   drafts ("draft_sampling": "sampled": x ~ q, Leviathan / Chen's full rule).
 *   Outputs differ from plain decoding's there (both are samples of p), so
 *   only those rows skip the token-for-token check.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Engine } from "../../src/engine/engine.js";
import { type LoadedModel, Tokenizer, loadModel, resolveSamplingParams } from "../../src/ops-entry.js";
import { createSyntheticModel, qwen25HalfBConfig } from "../../src/testing/index.js";
import { defaultModelDir } from "../../src/index.js";
import type { SyncModelRunner } from "../../src/model/model-runner.js";
import type { ChatMessage } from "../../src/tokenizer/chat-template.js";
import { llama2TokenizerDir } from "../../src/testing/index.js";
import type { Row, Suite, SuiteContext } from "../harness.js";
import { type DraftModelProposer, createDraftProposer } from "../../src/engine/draft-model-proposer.js";
import { earlyExitDraftDir } from "../early-exit-draft.js";
import { inflatedModelDir } from "../inflated-model.js";
import { rmSync } from "node:fs";

const RECIPE = join(import.meta.dirname, "..", "..", "..", "tools", "train-default-model");
const K = 4;
const SPEC = { method: "ngram", num_speculative_tokens: K, prompt_lookup_max: 4, prompt_lookup_min: 2 };

interface Workload {
  model: string;
  workload: string;
  runner: SyncModelRunner;
  tokenizer: Tokenizer;
  eos: readonly number[];
  prompts: number[][];
  maxTokens: number;
  /** Requests at once (all added up front). */
  batch: number;
  spec: Record<string, unknown>;
  /** A draft model's proposer, made fresh for each run (method `draft`); else prompt lookup. */
  proposer?: { name: string; make: () => DraftModelProposer };
  /** Sampling temperature of every request (seeded by its index). Default 0: greedy. */
  temperature?: number;
}

interface RunResult {
  tokens: number;
  ms: number;
  /** Tokens and ms after every request of a batch had its first token (the prefill steps left out). */
  decodeTokens: number;
  decodeMs: number;
  drafts: number;
  accepted: number;
  /** The cost of one draft (plain steps) the adaptive draft length weighed at the end, for k = 1 … K (Engine.draftCosts), or null. */
  draftCosts: number[] | null;
  outputs: number[][];
}

function runOnce(ctx: SuiteContext, w: Workload, spec: boolean): RunResult {
  const proposer = spec ? w.proposer?.make() : undefined;
  const engine = new Engine({ runner: w.runner, tokenizer: w.tokenizer, eosTokenIds: w.eos, runtime: ctx.rt, maxNumSeqs: Math.max(16, w.batch), ...(spec ? { speculativeConfig: w.spec } : {}), ...(proposer === undefined ? {} : { proposer }) });
  const T = w.temperature ?? 0;
  const outputs: number[][] = w.prompts.map(() => []);
  let decodeMs = 0;
  let decodeTokens = 0;
  const t0 = performance.now();
  try {
    for (let i = 0; i < w.prompts.length; i += w.batch) {
      const group = w.prompts.slice(i, i + w.batch);
      group.forEach((p, j) => engine.addRequest({ requestId: String(i + j), promptTokenIds: p, params: resolveSamplingParams({ temperature: T, maxTokens: w.maxTokens, seed: i + j }, w.runner.vocabSize) }));
      let started = 0; // requests of the group with a first token
      let decodeFrom = 0;
      while (engine.hasUnfinishedRequests) {
        for (const o of engine.step()) {
          const out = outputs[Number(o.requestId)]!;
          if (out.length === 0 && o.tokenIds.length > 0 && ++started === group.length) decodeFrom = performance.now();
          out.push(...o.tokenIds);
        }
      }
      if (started === group.length) {
        decodeMs += performance.now() - decodeFrom;
        decodeTokens += group.reduce((n, _, j) => n + outputs[i + j]!.length - 1, 0);
      }
    }
    const ms = performance.now() - t0;
    const sd = engine.stats().specDecode;
    return { tokens: outputs.reduce((n, o) => n + o.length, 0), ms, decodeTokens, decodeMs, drafts: sd?.numDraftTokens ?? 0, accepted: sd?.numAcceptedTokens ?? 0, draftCosts: engine.draftCosts(), outputs };
  } finally {
    engine.dispose();
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;

async function measure(ctx: SuiteContext, w: Workload, rounds: number): Promise<Row> {
  runOnce(ctx, w, false); // warm-up: kernels, step buffers at their size
  const plain: number[] = [];
  const spec: number[] = [];
  const ratios: number[] = [];
  const plainDecode: number[] = [];
  const specDecode: number[] = [];
  const decodeRatios: number[] = [];
  let last: RunResult | null = null;
  for (let r = 0; r < rounds; r++) {
    const a = runOnce(ctx, w, false);
    const b = runOnce(ctx, w, true);
    if ((w.temperature ?? 0) === 0 && JSON.stringify(a.outputs) !== JSON.stringify(b.outputs)) throw new Error(`${w.workload}: speculative greedy output differs from plain decoding`);
    plain.push((a.tokens * 1000) / a.ms);
    spec.push((b.tokens * 1000) / b.ms);
    ratios.push(a.ms / b.ms);
    plainDecode.push((a.decodeTokens * 1000) / a.decodeMs);
    specDecode.push((b.decodeTokens * 1000) / b.decodeMs);
    decodeRatios.push(((b.decodeTokens / b.decodeMs) * a.decodeMs) / a.decodeTokens);
    last = b;
  }
  const row: Row = {
    method: w.proposer !== undefined ? `draft: ${w.proposer.name}` : `ngram${w.spec["prompt_lookup_min"] === 1 ? " (min 1)" : ""}${w.spec["disable_by_batch_size"] === undefined ? "" : ` (off at ${String(w.spec["disable_by_batch_size"])})`}`,
    k: K,
    workload: w.workload,
    model: w.model,
    batch: w.batch,
    temperature: w.temperature ?? 0,
    tokens: last!.tokens,
    acceptance: last!.drafts === 0 ? 0 : last!.accepted / last!.drafts,
    draft_tokens: last!.drafts,
    draft_cost: last!.draftCosts?.map((c) => c.toFixed(2)).join("/") ?? "—",
    plain_tok_s: median(plain),
    tok_s: median(spec),
    over_plain: median(ratios),
    plain_decode_tok_s: median(plainDecode),
    decode_tok_s: median(specDecode),
    decode_over_plain: median(decodeRatios),
  };
  ctx.log(`${w.model} ${w.workload} batch ${w.batch} T ${w.temperature ?? 0} ${row["method"] as string}: acceptance ${(row["acceptance"] as number).toFixed(2)}, ${median(spec).toFixed(1)} tok/s vs ${median(plain).toFixed(1)} plain: ×${median(ratios).toFixed(2)} (decode alone ×${median(decodeRatios).toFixed(2)})`);
  return row;
}

/**
 * The weight-bound rows: the default model inflated to Qwen2.5-0.5B's layer
 * shapes (inflated-model.ts), q8, with prompt lookup at batch 1 and 16 streams, and the
 * default model (q8, the same function) drafting for it at batch 1.
 */
export async function weightBoundRows(ctx: SuiteContext, p: { define: number[][]; copy: number[][]; chatTokenizer: Tokenizer }): Promise<Row[]> {
  const { rt, quick, log } = ctx;
  const rounds = quick ? 1 : 3;
  const n = quick ? 2 : 4;
  log("the default model inflated to Qwen2.5-0.5B's layer shapes, q8…");
  const inflated = inflatedModelDir(defaultModelDir());
  const exitDir = earlyExitDraftDir(defaultModelDir(), 2);
  const rows: Row[] = [];
  try {
    const target = loadModel(rt, inflated.dir, { progress: false, weights: "q8", maxNumSeqs: 16 });
    const draft = loadModel(rt, defaultModelDir(), { progress: false, weights: "q8" });
    const exit = loadModel(rt, exitDir, { progress: false, weights: "q8" });
    try {
      log(`inflated: ${inflated.params} parameters, ${target.runner.weights.bytesPerToken} bytes of q8 weights read a decode step`);
      const base = { model: "default inflated to qwen2.5-0.5b shapes, q8", runner: target.runner, tokenizer: p.chatTokenizer, eos: target.eosTokenIds, maxTokens: 64, spec: SPEC };
      rows.push(await measure(ctx, { ...base, workload: "context_copy", prompts: p.copy.slice(0, n), batch: 1 }, rounds));
      rows.push(await measure(ctx, { ...base, workload: "define", prompts: p.define.slice(0, n), batch: 1 }, rounds));
      rows.push(await measure(ctx, { ...base, workload: "define", prompts: p.define.slice(0, n), batch: 1, spec: { ...SPEC, prompt_lookup_min: 1 } }, rounds));
      // 16 streams of short prompts (a 60-token copy prompt's prefill costs more than its answer here).
      rows.push(await measure(ctx, { ...base, workload: "define", prompts: p.define, batch: 16, spec: { ...SPEC, prompt_lookup_min: 1, disable_by_batch_size: 8 } }, rounds));
      rows.push(await measure(ctx, { ...base, workload: "define", prompts: p.define, batch: 16, spec: { ...SPEC, prompt_lookup_min: 1, disable_by_batch_size: 64 } }, rounds));
      const pair = (d: LoadedModel, name: string, forced: boolean) => ({
        name: `${name}, ${forced ? "forced" : "adaptive"}`,
        make: () => createDraftProposer({ name: "inflated", tokenizer: target.tokenizer, runner: target.runner }, { name, tokenizer: d.tokenizer, runner: d.runner }, forced ? { draftCost: 0 } : {}),
      });
      const same = "default q8 (the same function)";
      const early = "default layers 0-1 q8 (early exit)";
      const draftSpec = { model: "draft", num_speculative_tokens: K };
      rows.push(await measure(ctx, { ...base, workload: "define", prompts: p.define.slice(0, n), batch: 1, spec: draftSpec, proposer: pair(draft, same, true) }, rounds));
      rows.push(await measure(ctx, { ...base, workload: "define", prompts: p.define.slice(0, n), batch: 1, spec: draftSpec, proposer: pair(draft, same, false) }, rounds));
      // A pair that computes two functions: the trained model's first 2 of 4 layers with its own norm and head.
      rows.push(await measure(ctx, { ...base, workload: "define", prompts: p.define.slice(0, n), batch: 1, spec: draftSpec, proposer: pair(exit, early, true) }, rounds));
      rows.push(await measure(ctx, { ...base, workload: "define", prompts: p.define.slice(0, n), batch: 1, spec: draftSpec, proposer: pair(exit, early, false) }, rounds));
      rows.push(await measure(ctx, { ...base, workload: "context_copy", prompts: p.copy.slice(0, n), batch: 1, spec: draftSpec, proposer: pair(exit, early, false) }, rounds));
    } finally {
      target.runner.dispose();
      draft.runner.dispose();
      exit.runner.dispose();
    }
  } finally {
    rmSync(inflated.dir, { recursive: true, force: true });
    rmSync(exitDir, { recursive: true, force: true });
  }
  return rows;
}

interface HeldOut {
  word: string;
}

export const spec: Suite = {
  name: "spec",
  description: "speculative decoding (prompt lookup and draft models, k = 4) against plain decoding: acceptance, tokens/s, ratio",
  async run(ctx): Promise<Row[]> {
    const { rt, quick, log } = ctx;
    const rounds = quick ? 2 : 5;
    const rows: Row[] = [];
    // KVFLASH_SPEC_ROWS=weight-bound: only the rows on the inflated model (the default-model prompts are still built).
    const only = process.env["KVFLASH_SPEC_ROWS"];
    if (only !== undefined && only !== "weight-bound") throw new Error(`KVFLASH_SPEC_ROWS: unknown value ${JSON.stringify(only)}; known: weight-bound`);
    const model: LoadedModel = loadModel(rt, defaultModelDir(), { progress: false, maxNumSeqs: 16 });
    const tok = model.tokenizer;
    const chat = (messages: ChatMessage[]) => tok.encode(tok.applyChatTemplate(messages, { addGenerationPrompt: true }), { addSpecialTokens: false });
    const words = readFileSync(join(RECIPE, "heldout.jsonl"), "utf8").trim().split("\n").map((l) => (JSON.parse(l) as HeldOut).word).filter((w) => w[0] === w[0]!.toLowerCase());
    const n = quick ? 8 : 16;
    const base = { model: "default", runner: model.runner, tokenizer: tok, eos: model.eosTokenIds, maxTokens: 64, spec: SPEC };
    try {
      const define = words.slice(0, n).map((w) => chat([{ role: "user", content: `What is a ${w}?` }]));
      // The model's own first answers, then the same question again.
      const first = runOnce(ctx, { ...base, workload: "first turn", prompts: define, batch: 1 }, false).outputs;
      const copy = words.slice(0, n).map((w, i) => {
        const answer = tok.decode(first[i]!, { skipSpecialTokens: true }).trim();
        return chat([{ role: "user", content: `What is a ${w}?` }, { role: "assistant", content: answer }, { role: "user", content: `What is a ${w}?` }]);
      });
      if (only === undefined) {
        rows.push(await measure(ctx, { ...base, workload: "context_copy", prompts: copy, batch: 1 }, rounds));
        rows.push(await measure(ctx, { ...base, workload: "define", prompts: define, batch: 1 }, rounds));
        const many = words.slice(0, 32).map((w) => chat([{ role: "user", content: `What is a ${w}?` }]));
        rows.push(await measure(ctx, { ...base, workload: "define", prompts: many, batch: 16, spec: { ...SPEC, disable_by_batch_size: 8 } }, rounds));
        rows.push(await measure(ctx, { ...base, workload: "define", prompts: many, batch: 16, spec: { ...SPEC, disable_by_batch_size: 64 } }, rounds));

        // Draft models beside the default model (the same tokenizer): itself, and its first two layers.
        log("draft models: the default model itself, its first 2 of 4 layers…");
        const exitDir = earlyExitDraftDir(defaultModelDir(), 2);
        const drafts = [
          { name: "default (itself)", model: loadModel(rt, defaultModelDir(), { progress: false }) },
          { name: "default layers 0-1 (early exit)", model: loadModel(rt, exitDir, { progress: false }) },
        ];
        try {
          const pair = (d: (typeof drafts)[number], forced: boolean, sampled = false) => ({
            name: `${d.name}, ${forced ? "forced" : "adaptive"}${sampled ? ", sampled drafts" : ""}`,
            make: () => createDraftProposer({ name: "default", tokenizer: tok, runner: model.runner }, { name: d.name, tokenizer: d.model.tokenizer, runner: d.model.runner }, { sampled, ...(forced ? { draftCost: 0 } : {}) }),
          });
          const draftSpec = { model: "draft", num_speculative_tokens: K };
          rows.push(await measure(ctx, { ...base, workload: "define", prompts: define, batch: 1, spec: draftSpec, proposer: pair(drafts[0]!, true) }, rounds));
          rows.push(await measure(ctx, { ...base, workload: "context_copy", prompts: copy, batch: 1, spec: draftSpec, proposer: pair(drafts[0]!, true) }, rounds));
          rows.push(await measure(ctx, { ...base, workload: "define", prompts: define, batch: 1, spec: draftSpec, proposer: pair(drafts[1]!, true) }, rounds));
          rows.push(await measure(ctx, { ...base, workload: "define", prompts: define, batch: 1, spec: draftSpec, proposer: pair(drafts[1]!, false) }, rounds));
          // Temperature 1: greedy drafts are kept at p(argmax); drafts sampled from q = p at ~1.
          rows.push(await measure(ctx, { ...base, workload: "define", prompts: define, batch: 1, temperature: 1, spec: draftSpec, proposer: pair(drafts[0]!, true) }, rounds));
          rows.push(await measure(ctx, { ...base, workload: "define", prompts: define, batch: 1, temperature: 1, spec: { ...draftSpec, draft_sampling: "sampled" }, proposer: pair(drafts[0]!, true, true) }, rounds));
        } finally {
          for (const d of drafts) d.model.runner.dispose();
          rmSync(exitDir, { recursive: true, force: true });
        }
      }
      rows.push(...(await weightBoundRows(ctx, { define, copy, chatTokenizer: tok })));
    } finally {
      model.runner.dispose();
    }

    if (only !== undefined) return rows;
    log("Qwen2.5-0.5B-shaped q8 (random weights)…");
    const qwen = createSyntheticModel(rt, { config: qwen25HalfBConfig(), weights: "q8", kvDtype: "bf16", numBlocks: 64, maxBatchTokens: 256 });
    try {
      const llama = Tokenizer.fromDir(llama2TokenizerDir());
      const prompts = Array.from({ length: quick ? 2 : 3 }, (_, i) => llama.encode(`Write a short story about the number ${i + 7} and a river that runs to the sea.`));
      const free = { model: "qwen2.5-0.5b-q8 (random)", workload: "free", runner: qwen, tokenizer: llama, eos: [], prompts, maxTokens: quick ? 24 : 48, batch: 1 };
      rows.push(await measure(ctx, { ...free, spec: SPEC }, quick ? 1 : 3));
      // One-token lookups find a match almost every step: drafts are proposed and rejected, and adaptivity must keep that cheap.
      rows.push(await measure(ctx, { ...free, spec: { ...SPEC, prompt_lookup_min: 1 } }, quick ? 1 : 3));
    } finally {
      qwen.dispose();
    }
    return rows;
  },
};

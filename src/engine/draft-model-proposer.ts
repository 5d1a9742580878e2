/**
 * The draft-model proposer for speculative decoding (vLLM's draft_model
 * method; Leviathan et al. 2023's small model Mq beside the target Mp): a
 * smaller model with the same tokenizer runs beside the target with its own
 * paged KV cache, and drafts k tokens per step greedily, one forward per draft
 * token, every drafting sequence in one ragged batch.
 *
 * The draft's cache follows each sequence's accepted tokens (vLLM's
 * draft-model runner does the same with its own KV):
 *
 *   cached   t0 … t(c−1) d1 … d(k−1)     what the draft computed last step (its drafts too)
 *   now      t0 … t(c−1) d1 … da x y     the target accepted a drafts, then sampled x (and y …)
 *   rollback cached length := the common prefix (c + a): the rest is stale, overwritten later
 *   catch-up one forward over the tokens past it (x …; a whole prompt the first time,
 *            in chunks of maxBatchTokens), whose last logit row gives draft 1
 *   draft    k − 1 forwards of one token each: draft j feeds draft j + 1
 *
 * Drafts are the argmax after the request's logit bias and penalties (as a
 * greedy target picks its token), the drafts before them counted as output.
 * Greedy drafts are a point mass q = δ_d, for which the engine's verification
 * (sample each row as plain decoding, accept while equal) is the rejection
 * sampling of Leviathan / Chen: the output distribution is the target's, and
 * a seeded request draws the same tokens as without speculation.
 *
 * With `sampled` (speculative config "draft_sampling": "sampled"), a request
 * that samples (temperature > 0) gets drafts drawn from the draft's own
 * distribution q: its logits through the request's whole sampler (logit bias,
 * penalties, temperature, min-p, top-k, top-p; Sampler.distribution), drawn
 * from a per-request stream seeded from the request's seed (so a seeded
 * request stays reproducible). Each position's q is kept (distributions())
 * for the engine's full rejection rule (rejection-sampler.ts). When draft and
 * target agree, sampled drafts are accepted with probability ≈ 1 where greedy
 * drafts are accepted with probability p(argmax) only. Greedy requests draft
 * greedily either way.
 *
 * A constrained request's drafts follow its grammar (DraftRequest.grammar, as
 * vLLM's spec-decode bitmask advances the matcher over the drafts): each
 * draft's q, or argmax, is taken over the tokens the grammar allows after the
 * drafts before it — the same mask the engine verifies that row under, so
 * the target's p and q share their support (a draft that equals its target
 * is then always accepted, as without a grammar). If the draft model puts no
 * mass on any allowed token, that draft is taken unmasked (the rejection rule
 * is exact for any q; the engine rejects it) and the grammar stops there.
 *
 * Blocks: a sequence holds ⌈cached / blockSize⌉ blocks between steps; the
 * engine calls release() when a request finishes or aborts. When the pool runs
 * short, the states of sequences not drafting this step go first, then the
 * sequence that does not fit drafts nothing this step. A forward that throws
 * leaves the draft's KV undefined: every state is dropped and no sequence
 * drafts that step (the target decodes on; `failures` counts it).
 */
import { ArgumentError, show } from "../errors.js";
import { BlockPool } from "../kv/block-pool.js";
import type { ForwardBatch } from "../model/forward-batch.js";
import type { SyncModelRunner } from "../model/model-runner.js";
import { checkInt } from "../tensor/check.js";
import type { Tokenizer } from "../tokenizer/tokenizer.js";
import type { ModelConfig } from "../model/config.js";
import { Prng } from "../tensor/prng.js";
import { Sampler, SamplingState, applyTokenMask } from "./sampler.js";
import { GREEDY_EPSILON, type ResolvedSamplingParams } from "./sampling-params.js";
import { type TokenDistribution, sampleFrom } from "./rejection-sampler.js";

/** One sequence asking for drafts: its tokens so far (prompt and output) and how many drafts at most. */
export interface DraftRequest {
  requestId: string;
  tokens: readonly number[];
  k: number;
  /**
   * The request's logit processors that a greedy target applies before its
   * argmax (sampler.ts processLogits): drafts follow them too, so a greedy
   * request with a repetition penalty has its drafts accepted as often as one
   * without. Default: none.
   */
  penalties?: DraftPenalties;
  /** The request's sampling parameters and seed: a sampling proposer draws from them (temperature > 0). Default: greedy. */
  sampling?: { params: ResolvedSamplingParams; seed: number };
  /**
   * A constrained request's grammar (the engine's matcher, advanced over the
   * drafts and rolled back after proposeBatch): drafts are chosen among the
   * tokens it allows. `nextMask(drafted)` gives the allowed tokens after the
   * request's tokens and then `drafted` (this step's drafts so far, in order):
   * Int32Array [ceil(V / 32)], bit t % 32 of word t >> 5 set ⇔ token t
   * allowed, valid until the next call; null when the grammar cannot follow
   * `drafted` (it ended, or refused one of them). Default: none.
   */
  grammar?: { nextMask(drafted: readonly number[]): Int32Array | null };
}

/** The sampler's logit bias and penalties (ResolvedSamplingParams' fields), and where the output starts in `tokens`. */
export interface DraftPenalties {
  numPromptTokens: number;
  repetitionPenalty: number;
  presencePenalty: number;
  frequencyPenalty: number;
  logitBias: ReadonlyMap<number, number>;
}

/** A proposer that drafts for every sequence of a step at once and keeps state per request (the draft model). */
export interface BatchDraftProposer {
  /** Drafts for each entry of `seqs`, in order (each ≤ its k; [] for none). */
  proposeBatch(seqs: readonly DraftRequest[]): number[][];
  /** The request finished or was aborted: free what it holds. Unknown ids are ignored. */
  release(requestId: string): void;
  /** Cost of drafting one token, in target decode steps (the adaptive draft length weighs it). Default 0. */
  readonly draftCost?: number;
  /**
   * The draft distributions q of the last proposeBatch's drafts for
   * `requestId`, one per draft (sampled drafts only; undefined for greedy
   * drafts, which are a point mass).
   */
  distributions?(requestId: string): readonly TokenDistribution[] | undefined;
}

export interface DraftModelProposerOptions {
  /** The draft model: a synchronous runner (the CPU decoder) with its own KV cache. */
  runner: SyncModelRunner;
  /** Drafts are argmax over ids < vocabLimit (the target's text vocabulary: padded rows are never proposed). */
  vocabLimit: number;
  /** Most tokens one catch-up forward carries (the runner's step buffers). Default 512. */
  maxBatchTokens?: number;
  /** Cost of one draft forward in target decode steps (BatchDraftProposer.draftCost). Default 0. */
  draftCost?: number;
  /** Sampled drafts for requests that sample (see the module comment). Default false: greedy drafts. */
  sampled?: boolean;
}

/** Derives a draft stream's seed from its request's: another stream than the target's own. */
const DRAFT_SEED_SALT = 0x5bd1e995;

interface SeqState {
  /** Tokens whose K/V the draft cache holds, in order (position p in slot blocks[⌊p/bs⌋]·bs + p mod bs). */
  cached: number[];
  blocks: number[];
}

export class DraftModelProposer implements BatchDraftProposer {
  readonly runner: SyncModelRunner;
  readonly pool: BlockPool;
  readonly blockSize: number;
  readonly vocabLimit: number;
  readonly maxBatchTokens: number;
  readonly draftCost: number;
  /** Draft forwards that threw (the states were dropped and that step drafted nothing). */
  failures = 0;
  /** The last such error's message, or null. */
  lastError: string | null = null;
  readonly sampled: boolean;
  readonly #seqs = new Map<string, SeqState>();
  /** Per request: the stream sampled drafts draw from (lives until release()). */
  readonly #rngs = new Map<string, Prng>();
  /** Per request: q of each draft the last proposeBatch returned (sampled drafts only). */
  readonly #lastQ = new Map<string, TokenDistribution[]>();
  readonly #sampler: Sampler;

  constructor(options: DraftModelProposerOptions) {
    const runner = options.runner;
    if (runner === null || typeof runner !== "object" || typeof runner.forward !== "function") throw new ArgumentError("runner", `must be a ModelRunner, got ${show(runner)}`);
    this.runner = runner;
    this.pool = new BlockPool({ numBlocks: runner.kvCache.numBlocks });
    this.blockSize = runner.kvCache.blockSize;
    this.vocabLimit = checkInt("vocabLimit", options.vocabLimit, { min: 1, max: runner.vocabSize });
    this.maxBatchTokens = checkInt("maxBatchTokens", options.maxBatchTokens ?? 512, { min: 1 });
    const cost = options.draftCost ?? 0;
    if (!(typeof cost === "number" && cost >= 0 && Number.isFinite(cost))) throw new ArgumentError("draftCost", `must be a finite number ≥ 0, got ${show(cost)}`);
    this.draftCost = cost;
    this.sampled = options.sampled ?? false;
    this.#sampler = new Sampler(runner.vocabSize);
  }

  distributions(requestId: string): readonly TokenDistribution[] | undefined {
    return this.#lastQ.get(requestId);
  }

  /** Sequences whose state the draft cache holds. */
  get numSequences(): number {
    return this.#seqs.size;
  }

  release(requestId: string): void {
    this.#rngs.delete(requestId);
    this.#lastQ.delete(requestId);
    this.#drop(requestId);
  }

  /** Frees a sequence's cached state (its draft stream stays). */
  #drop(requestId: string): void {
    const s = this.#seqs.get(requestId);
    if (s === undefined) return;
    this.pool.free([...s.blocks].reverse());
    this.#seqs.delete(requestId);
  }

  proposeBatch(seqs: readonly DraftRequest[]): number[][] {
    const out = seqs.map((): number[] => []);
    this.#lastQ.clear();
    try {
      this.#draft(seqs, out);
    } catch (e) {
      this.failures++;
      this.lastError = e instanceof Error ? e.message : String(e);
      for (const id of [...this.#seqs.keys()]) this.#drop(id);
      this.#lastQ.clear();
      return seqs.map(() => []);
    }
    return out;
  }

  #draft(seqs: readonly DraftRequest[], out: number[][]): void {
    const active = new Set(seqs.map((s) => s.requestId));
    // Catch-up: each sequence's tokens past its common prefix with the cache.
    const pending: { i: number; state: SeqState; rest: number[] }[] = [];
    seqs.forEach((s, i) => {
      if (s.k <= 0 || s.tokens.length === 0 || s.tokens.length + s.k - 1 > this.runner.maxModelLen) return;
      const state = this.#seqs.get(s.requestId) ?? { cached: [], blocks: [] };
      this.#seqs.set(s.requestId, state);
      let common = 0;
      const n = Math.min(state.cached.length, s.tokens.length - 1); // the last token is always fed: its logits give draft 1
      while (common < n && state.cached[common] === s.tokens[common]) common++;
      state.cached.length = common; // rollback: what follows is stale
      pending.push({ i, state, rest: s.tokens.slice(common) });
    });
    let last: { i: number; state: SeqState }[] = [];
    while (pending.length > 0) {
      const batch: { state: SeqState; feed: number[]; sample: boolean; i: number }[] = [];
      let budget = this.maxBatchTokens;
      while (pending.length > 0 && budget > 0) {
        const p = pending[0]!;
        const feed = p.rest.splice(0, budget);
        budget -= feed.length;
        if (p.rest.length === 0) pending.shift();
        if (!this.#reserve(p.state, p.state.cached.length + feed.length + seqs[p.i]!.k - 1, active)) {
          this.#drop(seqs[p.i]!.requestId);
          if (p.rest.length > 0) pending.shift();
          continue;
        }
        batch.push({ state: p.state, feed, sample: p.rest.length === 0, i: p.i });
      }
      if (batch.length === 0) continue;
      const logits = this.#forward(batch);
      let row = 0;
      for (const b of batch) {
        if (!b.sample) continue;
        out[b.i]!.push(this.#pick(logits, row++, seqs[b.i]!, out[b.i]!));
        last.push({ i: b.i, state: b.state });
      }
    }
    // Drafting: draft j is fed to get draft j + 1.
    for (;;) {
      last = last.filter((l) => out[l.i]!.length < seqs[l.i]!.k);
      if (last.length === 0) return;
      const logits = this.#forward(last.map((l) => ({ state: l.state, feed: [out[l.i]!.at(-1)!], sample: true, i: l.i })));
      last.forEach((l, row) => out[l.i]!.push(this.#pick(logits, row, seqs[l.i]!, out[l.i]!)));
    }
  }

  /** Holds blocks for `numTokens` positions of `state`, freeing idle sequences' first if short; false when they do not fit. */
  #reserve(state: SeqState, numTokens: number, active: ReadonlySet<string>): boolean {
    const need = Math.ceil(numTokens / this.blockSize) - state.blocks.length;
    if (need <= 0) return true;
    let got = this.pool.allocate(need);
    for (const id of [...this.#seqs.keys()]) {
      if (got !== null) break;
      if (!active.has(id)) {
        this.#drop(id);
        got = this.pool.allocate(need);
      }
    }
    if (got === null) return false;
    state.blocks.push(...got);
    return true;
  }

  /** One forward: each entry's `feed` tokens follow its cached ones; one logit row (its last token) per entry that samples. */
  #forward(entries: readonly { state: SeqState; feed: readonly number[]; sample: boolean }[]): Float32Array {
    const bs = this.blockSize;
    const B = entries.length;
    const T = entries.reduce((n, e) => n + e.feed.length, 0);
    const maxBlocksPerSeq = entries.reduce((m, e) => Math.max(m, Math.ceil((e.state.cached.length + e.feed.length) / bs)), 0);
    const batch: ForwardBatch = {
      tokens: new Int32Array(T),
      positions: new Int32Array(T),
      cuSeqlensQ: new Int32Array(B + 1),
      seqLens: new Int32Array(B),
      blockTable: new Int32Array(B * maxBlocksPerSeq), // [B, maxBlocksPerSeq]
      maxBlocksPerSeq,
      slotMapping: new Int32Array(T),
      logitIndices: new Int32Array(entries.filter((e) => e.sample).length),
    };
    let t = 0;
    let row = 0;
    entries.forEach((e, b) => {
      const { cached, blocks } = e.state;
      for (const token of e.feed) {
        const p = cached.length;
        batch.tokens[t] = token;
        batch.positions[t] = p;
        batch.slotMapping[t] = blocks[Math.floor(p / bs)]! * bs + (p % bs);
        cached.push(token);
        t++;
      }
      batch.cuSeqlensQ[b + 1] = t;
      batch.seqLens[b] = cached.length;
      for (let i = 0; i < Math.ceil(cached.length / bs); i++) batch.blockTable[b * maxBlocksPerSeq + i] = blocks[i]!;
      if (e.sample) batch.logitIndices[row++] = t - 1;
    });
    const logits: unknown = this.runner.forward(batch);
    if (!(logits instanceof Float32Array)) throw new ArgumentError("runner", `must be synchronous (the CPU decoder): its forward returned ${show(logits)}`);
    return logits;
  }

  /** The next draft from row `row`: sampled from q (kept in #lastQ) when this proposer and `seq` sample, else #argmax. */
  #pick(logits: Float32Array, row: number, seq: DraftRequest, drafted: readonly number[]): number {
    const s = seq.sampling;
    const V = this.runner.vocabSize;
    const x = logits.subarray(row * V, (row + 1) * V);
    if (this.vocabLimit < V) x.fill(-Infinity, this.vocabLimit);
    const allowed = seq.grammar === undefined ? null : allowedIn(x, seq.grammar.nextMask(drafted));
    if (!this.sampled || s === undefined || s.params.temperature < GREEDY_EPSILON) return this.#argmax(logits, row, seq, drafted, allowed);
    let rng = this.#rngs.get(seq.requestId);
    if (rng === undefined) {
      rng = new Prng((new Prng(s.seed).nextU32() ^ DRAFT_SEED_SALT) >>> 0);
      this.#rngs.set(seq.requestId, rng);
    }
    // The request's sampler state as of this draft: prompt, output so far and the drafts before it.
    const numPrompt = seq.penalties?.numPromptTokens ?? seq.tokens.length;
    const state = new SamplingState(s.params, seq.tokens.slice(0, numPrompt), rng);
    for (let i = numPrompt; i < seq.tokens.length; i++) state.accept(seq.tokens[i]!);
    for (const t of drafted) state.accept(t);
    const q = this.#sampler.distribution(state, x, allowed);
    const token = sampleFrom(q, rng.nextFloat());
    const qs = this.#lastQ.get(seq.requestId) ?? [];
    qs.push(q);
    this.#lastQ.set(seq.requestId, qs);
    return token;
  }

  /** argmax over ids < vocabLimit (and in `allowed`, when given) of row `row`, after `seq`'s penalties with `drafted` counted as output. */
  #argmax(logits: Float32Array, row: number, seq: DraftRequest, drafted: readonly number[], allowed: Int32Array | null): number {
    const V = this.runner.vocabSize;
    const x = logits.subarray(row * V, row * V + this.vocabLimit);
    const p = seq.penalties;
    if (p !== undefined && (p.logitBias.size > 0 || p.repetitionPenalty !== 1 || p.presencePenalty !== 0 || p.frequencyPenalty !== 0)) {
      const counts = new Map<number, number>();
      for (let i = p.numPromptTokens; i < seq.tokens.length; i++) counts.set(seq.tokens[i]!, (counts.get(seq.tokens[i]!) ?? 0) + 1);
      for (const t of drafted) counts.set(t, (counts.get(t) ?? 0) + 1);
      const seen = new Set(p.repetitionPenalty === 1 ? [] : seq.tokens.slice(0, p.numPromptTokens));
      for (const t of counts.keys()) seen.add(t);
      for (const [id, bias] of p.logitBias) if (id < x.length) x[id] = x[id]! + bias;
      if (p.repetitionPenalty !== 1) {
        for (const id of seen) if (id < x.length) x[id] = x[id]! > 0 ? x[id]! / p.repetitionPenalty : x[id]! * p.repetitionPenalty;
      }
      if (p.presencePenalty !== 0 || p.frequencyPenalty !== 0) {
        for (const [id, n] of counts) if (id < x.length) x[id] = x[id]! - p.frequencyPenalty * n - p.presencePenalty;
      }
    }
    if (allowed !== null) applyTokenMask(x, allowed);
    let best = 0;
    let bestValue = -Infinity;
    for (let i = 0; i < x.length; i++) {
      if (x[i]! > bestValue) {
        bestValue = x[i]!;
        best = i;
      }
    }
    return best;
  }
}

/**
 * `mask` when some token it allows has a finite logit in `x` (f32 [V]), else
 * null (the grammar ended, or the draft gives all it allows −∞: draft unmasked).
 */
function allowedIn(x: Float32Array, mask: Int32Array | null): Int32Array | null {
  if (mask === null) return null;
  const words = Math.min(mask.length, Math.ceil(x.length / 32));
  for (let w = 0; w < words; w++) {
    const bits = mask[w]!;
    if (bits === 0) continue;
    for (let b = 0; b < 32 && (w << 5) + b < x.length; b++) if (((bits >>> b) & 1) === 1 && x[(w << 5) + b]! > -Infinity) return mask;
  }
  return null;
}

/**
 * Checks that a draft model can propose for a target: the same tokenizer
 * vocabulary, id for id. Throws naming both models and the first difference.
 */
export function checkSameVocabulary(target: { name: string; tokenizer: Tokenizer }, draft: { name: string; tokenizer: Tokenizer }): void {
  const [a, b] = [target.tokenizer, draft.tokenizer];
  const fail = (what: string) => {
    throw new ArgumentError("speculativeConfig.model", `the draft model ${draft.name} must share the target model ${target.name}'s tokenizer: ${what}`);
  };
  if (a.vocabSize !== b.vocabSize) fail(`its vocabulary has ${b.vocabSize} tokens, the target's ${a.vocabSize}`);
  for (let id = 0; id < a.vocabSize; id++) {
    const [x, y] = [a.idToToken(id), b.idToToken(id)];
    if (x !== y) fail(`token ${id} is ${show(y)} in the draft, ${show(x)} in the target`);
  }
}

/** A loaded model as the draft-model pairing sees it. */
export interface DraftPairModel {
  /** How errors name it (its path or hub spec). */
  name: string;
  tokenizer: Tokenizer;
  runner: { readonly vocabSize: number; readonly config: ModelConfig };
}

/**
 * Weights one decode step reads, in parameters (attention, MLP, embedding
 * row and head): a decode step is bound by reading them, so a draft step
 * costs about params(draft) / params(target) of a target step.
 */
export function decodeStepParams(c: ModelConfig): number {
  const attention = c.hiddenSize * c.headDim * (2 * c.numHeads + 2 * c.numKvHeads);
  const mlp = 3 * c.hiddenSize * c.intermediateSize;
  return c.numLayers * (attention + mlp) + c.vocabSize * c.hiddenSize;
}

/**
 * The proposer for `draft` drafting for `target`, after checking the pair:
 * the same tokenizer vocabulary (checkSameVocabulary), and a draft runner
 * whose rows cover the target's text vocabulary. The draft's runner must be
 * synchronous (the CPU decoder). `draftCost` (default: decodeStepParams'
 * ratio) tells the adaptive draft length what a draft costs, so a draft as
 * big as its target stops drafting: it cannot be faster than plain decoding.
 */
export function createDraftProposer(target: DraftPairModel, draft: DraftPairModel & { runner: SyncModelRunner }, options: { maxBatchTokens?: number; draftCost?: number; sampled?: boolean } = {}): DraftModelProposer {
  checkSameVocabulary(target, draft);
  const textVocab = Math.min(target.tokenizer.vocabSize, target.runner.vocabSize);
  if (draft.runner.vocabSize < textVocab) {
    throw new ArgumentError("speculativeConfig.model", `the draft model ${draft.name} has ${draft.runner.vocabSize} logit rows, fewer than the ${textVocab} tokens of the target model ${target.name}`);
  }
  const draftCost = options.draftCost ?? decodeStepParams(draft.runner.config) / decodeStepParams(target.runner.config);
  return new DraftModelProposer({ runner: draft.runner, vocabLimit: textVocab, draftCost, sampled: options.sampled ?? false, ...(options.maxBatchTokens === undefined ? {} : { maxBatchTokens: options.maxBatchTokens }) });
}

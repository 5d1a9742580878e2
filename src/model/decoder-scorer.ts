/**
 * A decoder served as a reranker from its yes/no logits — Qwen3-Reranker, as
 * vLLM serves it (`--task score`; vLLM's hf_overrides
 * classifier_from_token ["no", "yes"] with is_original_qwen3_reranker): each
 * text pair, concatenated by the tokenizer's pair template (the caller writes
 * Qwen3-Reranker's prompt around the query and the document), is one causal
 * prefill, and its score is
 *
 *   p(yes) = softmax([logit_no, logit_yes])[1] = sigmoid(logit_yes − logit_no)
 *
 * at the last token — what vLLM's conversion computes with the one-row
 * classifier lm_head[yes] − lm_head[no]. The tokens are config.json's
 * classifier_from_token [false, true] when it names them, else "no" and "yes".
 * The step layout is the decoder embedder's (wholeSequenceStep: no KV kept).
 */
import { ArgumentError, show } from "../errors.js";
import type { Tokenizer } from "../tokenizer/tokenizer.js";
import type { Decoder } from "./decoder.js";
import type { EncoderBatch } from "./encoder/bert-encoder.js";
import { wholeSequenceStep } from "./decoder-embedder.js";
import type { PoolingModel, PoolingModelInfo } from "./pooling-model.js";

/** The [no, yes] token ids: config.json's classifier_from_token (vLLM's key), else Qwen3-Reranker's "no" and "yes". */
export function yesNoTokens(config: Record<string, unknown>, tokenizer: Tokenizer, source: string): { no: number; yes: number } {
  const named = config["classifier_from_token"] ?? ["no", "yes"];
  if (!Array.isArray(named) || named.length !== 2 || named.some((t) => typeof t !== "string")) {
    throw new ArgumentError(`${source} classifier_from_token`, `must be two token strings [false, true], got ${show(named)}`);
  }
  const [no, yes] = (named as string[]).map((t) => {
    const id = tokenizer.tokenToId(t);
    if (id === undefined) throw new ArgumentError(`${source} classifier_from_token`, `names ${show(t)}, which is not a token of the model's vocabulary`);
    return id;
  }) as [number, number];
  return { no, yes };
}

export class DecoderScorer implements PoolingModel {
  readonly info: PoolingModelInfo;
  readonly decoder: Decoder;
  readonly #no: number;
  readonly #yes: number;

  /** The scorer owns `decoder` from now on (dispose frees it). */
  constructor(decoder: Decoder, info: PoolingModelInfo, tokens: { no: number; yes: number }) {
    for (const [name, id] of Object.entries(tokens)) {
      if (!Number.isInteger(id) || id < 0 || id >= decoder.vocabSize) throw new ArgumentError(`tokens.${name}`, `must be a token id in [0, ${decoder.vocabSize}), got ${show(id)}`);
    }
    if (!info.crossEncoder || info.dimensions !== 1) throw new ArgumentError("info", `must describe a cross-encoder with one score, got crossEncoder ${info.crossEncoder}, dimensions ${info.dimensions}`);
    this.decoder = decoder;
    this.info = info;
    this.#no = tokens.no;
    this.#yes = tokens.yes;
  }

  /** One [p(yes)] per sequence; where batch.raw[b], the raw logit_yes − logit_no (vLLM's use_activation false: its yes−no classifier row's logit). */
  embedBatch(batch: EncoderBatch): Float32Array[] {
    const { forward, cu } = wholeSequenceStep(this.decoder, batch, this.info.maxModelLen, "last");
    const logits = this.decoder.forward(forward); // [B, V]
    const V = this.decoder.vocabSize;
    return Array.from({ length: cu.length - 1 }, (_, b) => {
      const d = logits[b * V + this.#yes]! - logits[b * V + this.#no]!;
      return Float32Array.of(batch.raw?.[b] === true ? d : 1 / (1 + Math.exp(-d)));
    });
  }

  dispose(): void {
    this.decoder.dispose();
  }
}

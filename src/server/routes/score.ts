/**
 * The scoring routes, as vLLM serves them (serving_score.py): POST /v1/rerank
 * (also /rerank and /v2/rerank; Jina's and Cohere's shape) and POST /v1/score
 * (also /score). Each text pair is scored in the engine worker:
 *
 *   cross-encoder    the pair encoded with the tokenizer's pair template (with
 *                    its token types) in the tokenizer pool, then the
 *                    encoder + classification head: sigmoid(logit) (the raw
 *                    logit with use_activation false); or a
 *                    decoder's yes/no logits (Qwen3-Reranker, --task score)
 *   embedding model  both texts embedded, then their cosine similarity (vLLM's
 *                    score for a bi-encoder)
 *
 * truncate_prompt_tokens k (vLLM's): a cross-encoder pair is cut to k tokens
 * with the tokenizer's longest_first strategy (pair-truncation.ts), a
 * bi-encoder's texts each to k as /v1/embeddings cuts them (right side, the
 * special-token wrap kept).
 *
 * All the pairs of a request are one engine request, batched with every other
 * request's sequences. A generative model is a 400 naming the model.
 *
 *   rerank → { id, model, usage: { prompt_tokens, total_tokens }, results: [{ index, document: { text }, relevance_score }] }   best first, top_n of them
 *   score  → { id, object: "list", created, model, data: [{ index, object: "score", score }], usage }
 */
import { randomUUID } from "node:crypto";
import { clip } from "../../errors.js";
import { bodyOptions, readJsonBody } from "../body.js";
import { whileConnected } from "../client-gone.js";
import type { Handler, ServerContext } from "../context.js";
import type { EmbeddingInfo } from "../../engine/protocol.js";
import { HttpError, badRequest, sendJson } from "../errors.js";
import { Fields } from "../fields.js";
import { contextLimit, encodePrompt, refuseLongText } from "../prompt-length.js";
import { type ScorePair, parseRerankRequest, parseScoreRequest } from "../score-request.js";
import { truncateIds } from "../embedding-request.js";
import { truncatePair } from "../pair-truncation.js";

/** The served model's pooling info, or a 400 naming the model when it cannot score; an unknown `model` is a 404. */
function scoringModel(ctx: ServerContext, model: string | undefined, api: string): EmbeddingInfo {
  if (model !== undefined && !ctx.modelNames.includes(model)) {
    throw new HttpError(404, `The model \`${clip(model)}\` does not exist.`, { type: "invalid_request_error", param: "model", code: "model_not_found" });
  }
  if (ctx.shuttingDown) throw new HttpError(503, "the server is shutting down");
  const s = ctx.engine.state;
  if (s.state !== "ready") throw new HttpError(503, "the model is still loading");
  const info = s.info.embedding;
  if (info === undefined) {
    throw badRequest("model", `The model \`${ctx.modelNames[0]}\` does not support the ${api} API: it is a generative model (serve a cross-encoder such as a BertForSequenceClassification or XLMRobertaForSequenceClassification reranker, or an embedding model).`);
  }
  return info;
}

/** Pools token sequences in the engine worker as one request; the client leaving aborts it. */
async function pool(ctx: ServerContext, signal: AbortSignal, requestId: string, sequences: number[][], tokenTypes?: number[][], raw = false): Promise<{ vectors: Float32Array[]; promptTokens: number }> {
  const onGone = (): void => ctx.engine.abort(requestId);
  signal.addEventListener("abort", onGone, { once: true });
  let out;
  try {
    out = await ctx.engine.embed({ requestId, sequences, ...(tokenTypes === undefined ? {} : { tokenTypes }), ...(raw ? { raw } : {}) });
  } finally {
    signal.removeEventListener("abort", onGone);
  }
  if (out.embeddings === null) throw new HttpError(500, out.error ?? "the scoring failed");
  return { vectors: out.embeddings, promptTokens: out.promptTokens };
}

/** One pair → its cross-encoder input in the tokenizer pool; cut to `truncate` tokens, or longer than the context → 400 naming the document's field. */
async function encodePair(ctx: ServerContext, pair: ScorePair, limit: number, truncate: number | null, alone: Map<string, Promise<number[]>>): Promise<{ ids: number[]; typeIds: number[] }> {
  if (truncate === null) refuseLongText(ctx, pair.a.length + pair.b.length, pair.param);
  const e = await ctx.tokenizerPool.encodePair(pair.a, pair.b);
  if (truncate !== null && e.ids.length > truncate) {
    // Each text alone, once per request: a rerank's query is every pair's first text.
    const encodeAlone = (t: string): Promise<number[]> => {
      let ids = alone.get(t);
      if (ids === undefined) alone.set(t, (ids = ctx.tokenizerPool.encode(t, { addSpecialTokens: false })));
      return ids;
    };
    const [a, b] = await Promise.all([encodeAlone(pair.a), encodeAlone(pair.b)]);
    const cut = truncatePair(e, a!, b!, truncate);
    if (cut === null) throw badRequest("truncate_prompt_tokens", `truncate_prompt_tokens ${truncate} leaves no room for the texts: the pair template alone takes ${e.ids.length - a!.length - b!.length} tokens`);
    return cut;
  }
  if (e.ids.length > limit) {
    throw badRequest(pair.param, `This model's maximum context length is ${limit} tokens. However, the query and your ${pair.param} have ${e.ids.length} tokens together. Shorten them, or set truncate_prompt_tokens.`, "context_length_exceeded");
  }
  return e;
}

function cosine(u: Float32Array, v: Float32Array): number {
  let dot = 0;
  let uu = 0;
  let vv = 0;
  for (let i = 0; i < u.length; i++) {
    dot += u[i]! * v[i]!;
    uu += u[i]! * u[i]!;
    vv += v[i]! * v[i]!;
  }
  return dot / Math.max(Math.sqrt(uu) * Math.sqrt(vv), 1e-8); // torch.nn.functional.cosine_similarity's eps
}

/** The score of each pair, in order, and the tokens they took. */
async function scorePairs(ctx: ServerContext, signal: AbortSignal, info: EmbeddingInfo, pairs: ScorePair[], truncate: number | null, activation: boolean, requestId: string): Promise<{ scores: number[]; promptTokens: number }> {
  const limit = contextLimit(ctx);
  if (info.crossEncoder) {
    const alone = new Map<string, Promise<number[]>>(); // text → its ids without special tokens (truncation only)
    const encoded = await whileConnected(signal, Promise.all(pairs.map((p) => encodePair(ctx, p, limit, truncate, alone))));
    const types = info.tokenTypes ? encoded.map((e) => e.typeIds) : undefined; // a decoder (Qwen3-Reranker) or XLM-R reads none
    const { vectors, promptTokens } = await pool(ctx, signal, requestId, encoded.map((e) => e.ids), types, !activation);
    return { scores: vectors.map((v) => v[0]!), promptTokens };
  }
  // A bi-encoder: each distinct text embedded once, then the cosine of each pair.
  const distinct = [...new Set(pairs.flatMap((p) => [p.a, p.b]))];
  const paramOf = new Map<string, string>(); // each distinct text → the first field it came from, for errors
  for (const p of pairs) {
    if (!paramOf.has(p.a)) paramOf.set(p.a, p.param.startsWith("documents") ? "query" : p.param.replace("text_2", "text_1"));
    if (!paramOf.has(p.b)) paramOf.set(p.b, p.param);
  }
  const isSpecial = (id: number): boolean => ctx.tokenizer.isSpecial(id);
  const encodeText = async (t: string): Promise<number[]> =>
    truncate === null ? encodePrompt(ctx, t, true, paramOf.get(t)!) : truncateIds(await ctx.tokenizerPool.encode(t, { addSpecialTokens: true }), truncate, true, isSpecial);
  const ids = await whileConnected(signal, Promise.all(distinct.map(encodeText)));
  const { vectors, promptTokens } = await pool(ctx, signal, requestId, ids);
  const at = new Map(distinct.map((t, i) => [t, vectors[i]!]));
  return { scores: pairs.map((p) => cosine(at.get(p.a)!, at.get(p.b)!)), promptTokens };
}

export const rerank: Handler = async (req, res, ctx, signal) => {
  const f = new Fields(await readJsonBody(req, bodyOptions(ctx, signal)));
  const model = f.string("model");
  const info = scoringModel(ctx, model, "Rerank");
  const request = parseRerankRequest(f, contextLimit(ctx));
  const requestId = `rerank-${randomUUID()}`;
  const pairs = request.documents.map((b, i) => ({ a: request.query, b, param: `documents[${i}]` }));
  const { scores, promptTokens } = await scorePairs(ctx, signal, info, pairs, request.truncate, request.activation, requestId);
  const order = scores.map((s, index) => ({ index, s })).sort((x, y) => y.s - x.s || x.index - y.index).slice(0, request.topN);
  sendJson(res, 200, {
    id: requestId,
    model: model ?? ctx.modelNames[0],
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
    results: order.map(({ index, s }) => ({ index, ...(request.returnDocuments ? { document: { text: request.documents[index]! } } : {}), relevance_score: s })),
  });
};

export const score: Handler = async (req, res, ctx, signal) => {
  const f = new Fields(await readJsonBody(req, bodyOptions(ctx, signal)));
  const model = f.string("model");
  const info = scoringModel(ctx, model, "Score");
  const request = parseScoreRequest(f, contextLimit(ctx));
  const requestId = `score-${randomUUID()}`;
  const { scores, promptTokens } = await scorePairs(ctx, signal, info, request.pairs, request.truncate, request.activation, requestId);
  sendJson(res, 200, {
    id: requestId,
    object: "list",
    created: Math.floor(Date.now() / 1000),
    model: model ?? ctx.modelNames[0],
    data: scores.map((s, index) => ({ index, object: "score", score: s })),
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens, completion_tokens: 0 },
  });
};

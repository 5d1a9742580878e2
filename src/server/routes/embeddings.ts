/**
 * POST /v1/embeddings (OpenAI's route, as vLLM serves it): texts are encoded
 * in the tokenizer pool, the token sequences pooled in the engine worker
 * (EmbedEngine: batched with every other request's sequences), and the
 * vectors answered as numbers or base64, truncated for `dimensions`.
 *
 *   → { id, object: "list", created, model, data: [{ object: "embedding", index, embedding }], usage: { prompt_tokens, total_tokens } }
 */
import { randomUUID } from "node:crypto";
import { clip } from "../../errors.js";
import { truncateEmbedding } from "../../model/encoder/pooling.js";
import { bodyOptions, readJsonBody } from "../body.js";
import { whileConnected } from "../client-gone.js";
import type { Handler } from "../context.js";
import { parseEmbeddingRequest, encodeEmbedding, truncateIds, type EmbeddingInput } from "../embedding-request.js";
import { HttpError, badRequest, sendJson } from "../errors.js";
import { Fields } from "../fields.js";
import { contextLimit, encodePrompt } from "../prompt-length.js";
import type { ServerContext } from "../context.js";

export const embeddings: Handler = async (req, res, ctx, signal) => {
  const f = new Fields(await readJsonBody(req, bodyOptions(ctx, signal)));
  const model = f.string("model");
  if (model !== undefined && !ctx.modelNames.includes(model)) {
    throw new HttpError(404, `The model \`${clip(model)}\` does not exist.`, { type: "invalid_request_error", param: "model", code: "model_not_found" });
  }
  if (ctx.shuttingDown) throw new HttpError(503, "the server is shutting down");
  const limit = contextLimit(ctx);
  const s = ctx.engine.state;
  const info = s.state === "ready" ? s.info.embedding : undefined;
  if (info === undefined) throw badRequest("model", `The model \`${ctx.modelNames[0]}\` does not support the Embeddings API: it is a generative model. Serve an embedding model (such as sentence-transformers/all-MiniLM-L6-v2), or start the server with --task embed to pool this decoder's last-token states.`);
  if (info.crossEncoder) throw badRequest("model", `The model \`${ctx.modelNames[0]}\` is a cross-encoder (${info.architecture}): it scores text pairs on POST /v1/rerank and /v1/score, and has no embeddings.`);
  const request = parseEmbeddingRequest(f, info, limit);
  const sequences = await whileConnected(signal, Promise.all(request.inputs.map((input, i) => tokenizeInput(ctx, input, request.truncate, request.inputs.length > 1 ? `input[${i}]` : "input", limit))));
  const requestId = `embd-${randomUUID()}`;
  const onGone = (): void => ctx.engine.abort(requestId);
  signal.addEventListener("abort", onGone, { once: true });
  let out;
  try {
    out = await ctx.engine.embed({ requestId, sequences });
  } finally {
    signal.removeEventListener("abort", onGone);
  }
  if (out.embeddings === null) throw new HttpError(500, out.error ?? "the embedding failed");
  sendJson(res, 200, {
    id: requestId,
    object: "list",
    created: Math.floor(Date.now() / 1000),
    model: model ?? ctx.modelNames[0],
    data: out.embeddings.map((v, index) => ({
      object: "embedding",
      index,
      embedding: encodeEmbedding(request.dimensions === null ? v : truncateEmbedding(v, request.dimensions), request.encodingFormat),
    })),
    usage: { prompt_tokens: out.promptTokens, total_tokens: out.promptTokens },
  });
};

/** A generation route (chat, completions) that an embedding model refuses with a 400 naming the model. */
export function generativeOnly(handler: Handler): Handler {
  return (req, res, ctx, signal) => {
    const s = ctx.engine.state;
    if (s.state === "ready" && s.info.task === "embed") {
      if (s.info.embedding?.crossEncoder === true) throw badRequest("model", `The model \`${ctx.modelNames[0]}\` is a cross-encoder (${s.info.embedding.architecture}): it serves POST /v1/rerank and /v1/score, not text generation.`);
      throw badRequest("model", `The model \`${ctx.modelNames[0]}\` is an embedding model: it serves POST /v1/embeddings, not text generation.`);
    }
    return handler(req, res, ctx, signal);
  };
}

/** One input's token ids: a text encoded in the tokenizer pool (with the model's special tokens), ids checked; too long → 400 or truncated. */
async function tokenizeInput(ctx: ServerContext, input: EmbeddingInput, truncate: number | null, param: string, limit: number): Promise<number[]> {
  const isSpecial = (id: number): boolean => ctx.tokenizer.isSpecial(id);
  if ("tokens" in input) {
    input.tokens.forEach((t, j) => {
      if (t < 0 || t >= ctx.vocabSize) throw badRequest(param, `${param}[${j}] must be a token id in [0, ${ctx.vocabSize}), got ${t}`);
    });
    if (truncate !== null) return truncateIds(input.tokens, truncate, false, isSpecial);
    if (input.tokens.length > limit) throw badRequest(param, `This model's maximum context length is ${limit} tokens. However, your ${param} has ${input.tokens.length} tokens. Shorten it, or set truncate_prompt_tokens.`, "context_length_exceeded");
    return input.tokens;
  }
  if (truncate === null) return encodePrompt(ctx, input.text, true, param);
  return truncateIds(await ctx.tokenizerPool.encode(input.text, { addSpecialTokens: true }), truncate, true, isSpecial);
}

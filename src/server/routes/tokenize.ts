/**
 * vLLM's tokenizer routes.
 *
 *   POST /tokenize    { prompt, add_special_tokens = true } | { messages, add_generation_prompt = true, add_special_tokens = false }
 *                     → { count, max_model_len, tokens, token_strs }
 *                     (encoded in the tokenizer pool; beyond the context: 400 context_length_exceeded)
 *   POST /detokenize  { tokens } → { prompt }
 *                     (at most max_model_len ids, request-shape.ts; decoded in the tokenizer pool)
 */
import { clip, show } from "../../errors.js";
import { bodyOptions, readJsonBody } from "../body.js";
import { whileConnected } from "../client-gone.js";
import { type Handler, maxModelLen } from "../context.js";
import { HttpError, badRequest, sendJson } from "../errors.js";
import { Fields } from "../fields.js";
import { contentChars } from "../../prompt-text.js";
import { encodeChatPrompt, encodePrompt, refuseLongText } from "../prompt-length.js";

export const tokenize: Handler = async (req, res, ctx, signal) => {
  const f = new Fields(await readJsonBody(req, bodyOptions(ctx, signal)));
  checkModel(f, ctx.modelNames);
  const tok = ctx.tokenizer;
  let tokens: number[];
  if (f.has("messages")) {
    const messages = f.raw("messages");
    if (!Array.isArray(messages) || messages.length === 0) throw badRequest("messages", `messages must be a non-empty array of { role, content }, got ${show(messages)}`);
    refuseLongText(ctx, contentChars(messages), "messages");
    const chat = { messages, addGenerationPrompt: f.boolean("add_generation_prompt") ?? true, variables: f.object("chat_template_kwargs") ?? {}, tools: undefined, continueFinal: false };
    tokens = await whileConnected(signal, encodeChatPrompt(ctx, chat, f.boolean("add_special_tokens") ?? false, signal));
  } else {
    const prompt = f.string("prompt");
    if (prompt === undefined) throw badRequest("prompt", "prompt (a string) or messages is required");
    tokens = await whileConnected(signal, encodePrompt(ctx, prompt, f.boolean("add_special_tokens") ?? true, "prompt", signal));
  }
  const strs = f.boolean("return_token_strs") ?? false;
  sendJson(res, 200, {
    count: tokens.length,
    max_model_len: maxModelLen(ctx),
    tokens,
    token_strs: strs ? tokens.map((t) => tok.idToToken(t) ?? "") : null,
  });
};

export const detokenize: Handler = async (req, res, ctx, signal) => {
  const f = new Fields(await readJsonBody(req, bodyOptions(ctx, signal)));
  checkModel(f, ctx.modelNames);
  const tokens = f.integers("tokens");
  if (tokens === undefined) throw badRequest("tokens", "tokens (an array of token ids) is required");
  tokens.forEach((t, i) => {
    if (t < 0 || t >= ctx.tokenizer.vocabSize) throw badRequest("tokens", `tokens[${i}] must be a token id in [0, ${ctx.tokenizer.vocabSize}), got ${t}`);
  });
  sendJson(res, 200, { prompt: await whileConnected(signal, ctx.tokenizerPool.decode(tokens, { signal })) });
};

function checkModel(f: Fields, names: readonly string[]): void {
  const model = f.string("model");
  if (model !== undefined && !names.includes(model)) {
    throw new HttpError(404, `The model \`${clip(model)}\` does not exist.`, { type: "invalid_request_error", param: "model", code: "model_not_found" });
  }
}

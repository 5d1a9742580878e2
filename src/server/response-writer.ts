/**
 * A non-streamed response written in slices (issue #32 item 2): the body's
 * skeleton (ids, texts, usage) is serialized at once, and each choice's
 * logprobs — the part that grows as choices × max_tokens × top_logprobs —
 * are built and serialized about SLICE_ENTRIES entries at a time, yielding to the
 * event loop between slices and waiting for the socket to drain, so /health
 * and every stream are served in between (4.5 MB of chat logprobs built and
 * serialized at once held the HTTP thread 300–700 ms at load 20). The JSON
 * is byte for byte what JSON.stringify(fullResponse(…)) gives.
 */
import type { ServerResponse } from "node:http";
import type { TokenLogprobs } from "../engine/engine.js";
import type { Tokenizer } from "../tokenizer/tokenizer.js";
import type { GenerationPlan } from "./openai-request.js";
import { type ChoiceState, chatLogprobs, completionLogprobs, fullResponse } from "./openai-response.js";

/**
 * Logprob entries built and serialized between two yields. A token id's text
 * is decoded on first use (openai-response.ts tokenText, then cached): 128 new
 * ones took ~50 ms at load 20, 64 tokens × 21 entries 600 ms.
 */
export const SLICE_ENTRIES = 128;

/** Tokens per slice for `top` alternatives each (the chosen token is one more entry). */
export function sliceTokens(top: number): number {
  return Math.max(1, Math.floor(SLICE_ENTRIES / (top + 1)));
}

/** Stand-in for choice i's logprobs in the skeleton (no JSON text contains a NUL unescaped, so its JSON form is unique). */
const mark = (i: number): string => `\u0000logprobs ${i}\u0000`;

function nextTurn(res: ServerResponse): Promise<void> {
  if (!res.writableNeedDrain) return new Promise((r) => setImmediate(r));
  return new Promise((r) => {
    const done = (): void => {
      res.off("drain", done);
      res.off("close", done);
      r();
    };
    res.on("drain", done);
    res.on("close", done);
  });
}

/** The JSON text of `lps` in the plan's format, as pieces of sliceTokens(plan.logprobs) tokens each. */
async function* logprobsJson(res: ServerResponse, plan: GenerationPlan, tokenizer: Tokenizer, lps: readonly TokenLogprobs[], offset: number): AsyncGenerator<string> {
  const slices: TokenLogprobs[][] = [];
  const size = sliceTokens(plan.logprobs ?? 0);
  for (let at = 0; at < lps.length; at += size) slices.push(lps.slice(at, at + size));
  const inner = (json: string): string => json.slice(1, -1);
  if (plan.kind === "chat") {
    yield '{"content":[';
    for (let s = 0; s < slices.length; s++) {
      yield (s > 0 ? "," : "") + inner(JSON.stringify(chatLogprobs(tokenizer, slices[s]!).content));
      await nextTurn(res);
    }
    yield "]}";
    return;
  }
  // Completions: four parallel arrays; each slice's part of each, kept until the arrays are written in order.
  const parts: Record<"tokens" | "token_logprobs" | "top_logprobs" | "text_offset", string[]> = { tokens: [], token_logprobs: [], top_logprobs: [], text_offset: [] };
  for (const slice of slices) {
    const c = completionLogprobs(tokenizer, slice, offset);
    for (const key of Object.keys(parts) as (keyof typeof parts)[]) parts[key].push(inner(JSON.stringify(c[key])));
    if (slice.length > 0) offset = c.text_offset.at(-1)! + c.tokens.at(-1)!.length;
    await nextTurn(res);
  }
  yield `{${(Object.keys(parts) as (keyof typeof parts)[]).map((key) => `${JSON.stringify(key)}:[${parts[key].filter((p) => p !== "").join(",")}]`).join(",")}}`;
}

/** Writes the non-streamed response for `choices` (status 200) in slices; stops early if the client goes away. */
export async function writeFullResponse(res: ServerResponse, plan: GenerationPlan, tokenizer: Tokenizer, choices: readonly ChoiceState[]): Promise<void> {
  if (plan.logprobs === null) {
    const text = JSON.stringify(fullResponse(plan, tokenizer, choices));
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
    res.end(text);
    return;
  }
  const skeleton = fullResponse({ ...plan, logprobs: null }, tokenizer, choices) as { choices: { logprobs: unknown }[] };
  skeleton.choices.forEach((c, i) => (c.logprobs = mark(i)));
  let rest = JSON.stringify(skeleton);
  res.writeHead(200, { "content-type": "application/json" });
  for (let i = 0; i < choices.length; i++) {
    const at = rest.indexOf(JSON.stringify(mark(i)));
    res.write(rest.slice(0, at));
    rest = rest.slice(at + JSON.stringify(mark(i)).length);
    const offset = plan.echo ? plan.prompts[i]!.text.length : 0;
    for await (const piece of logprobsJson(res, plan, tokenizer, choices[i]!.logprobs, offset)) {
      if (res.destroyed) return;
      res.write(piece);
    }
  }
  res.end(rest);
}

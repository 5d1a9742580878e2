/**
 * The body of POST /v1/embeddings, OpenAI's shape (and vLLM's one extra
 * field), parsed and checked into one typed value; every bad field is a 400
 * naming it.
 *
 *   input                  string | string[] | number[] (token ids) | number[][]   at most MAX_EMBEDDING_INPUTS
 *   encoding_format        "float" (default) | "base64" (little-endian f32 bytes)
 *   dimensions             Matryoshka truncation, only for a model that allows it
 *   truncate_prompt_tokens vLLM's: -1 = the model's limit, k ≥ 1 = keep k tokens
 *   model, user            checked / ignored
 */
import { show } from "../errors.js";
import type { EmbeddingInfo } from "../engine/protocol.js";
import { badRequest } from "./errors.js";
import type { Fields } from "./fields.js";

/** OpenAI's limit on the inputs of one request. */
export const MAX_EMBEDDING_INPUTS = 2048;

export type EmbeddingInput = { text: string } | { tokens: number[] };

export interface EmbeddingRequest {
  inputs: EmbeddingInput[];
  encodingFormat: "float" | "base64";
  /** Matryoshka length, or null for the model's own. */
  dimensions: number | null;
  /** Keep at most this many tokens of each input (null: an input beyond the context is a 400). */
  truncate: number | null;
}

function parseInput(raw: unknown): EmbeddingInput[] {
  if (typeof raw === "string") return [{ text: raw }];
  if (!Array.isArray(raw) || raw.length === 0) throw badRequest("input", `input must be a string, an array of strings, an array of token ids or an array of arrays of token ids, got ${show(raw)}`);
  if (raw.length > MAX_EMBEDDING_INPUTS) throw badRequest("input", `input must have at most ${MAX_EMBEDDING_INPUTS} items, got ${raw.length}`);
  const isId = (x: unknown): x is number => typeof x === "number" && Number.isSafeInteger(x);
  if (raw.every(isId)) return [{ tokens: raw }];
  return raw.map((item: unknown, i) => {
    if (typeof item === "string") return { text: item };
    if (Array.isArray(item) && item.every(isId)) return { tokens: item };
    throw badRequest("input", `input[${i}] must be a string or an array of token ids (all items of one kind), got ${show(item)}`);
  });
}

/** Parses the body against the served model's embedding info and context length. */
export function parseEmbeddingRequest(f: Fields, info: EmbeddingInfo, maxModelLen: number): EmbeddingRequest {
  if (!f.has("input")) throw badRequest("input", "input is required: a string, an array of strings, or token ids");
  const inputs = parseInput(f.raw("input"));
  inputs.forEach((x, i) => {
    if (("text" in x ? x.text.length : x.tokens.length) === 0) throw badRequest("input", `input${inputs.length > 1 || Array.isArray(f.raw("input")) ? `[${i}]` : ""} must not be empty`);
  });
  const format = f.string("encoding_format") ?? "float";
  if (format !== "float" && format !== "base64") throw badRequest("encoding_format", `encoding_format must be "float" or "base64", got ${show(format)}`);
  const dimensions = f.integer("dimensions", { min: 1 }) ?? null;
  if (dimensions !== null) {
    const m = info.matryoshka;
    if (m === null) throw badRequest("dimensions", `dimensions: the model does not support Matryoshka representation, so changing its output dimensions (${info.dimensions}) would give poor results; got ${dimensions}`);
    if (dimensions > info.dimensions) throw badRequest("dimensions", `dimensions must be ≤ the model's ${info.dimensions}, got ${dimensions}`);
    if (m !== "any" && !m.includes(dimensions)) throw badRequest("dimensions", `dimensions must be one of the model's Matryoshka dimensions ${show(m)}, got ${dimensions}`);
  }
  let truncate = f.integer("truncate_prompt_tokens", { min: -1 }) ?? null;
  if (truncate === 0) throw badRequest("truncate_prompt_tokens", "truncate_prompt_tokens must be -1 (the model's limit) or ≥ 1, got 0");
  if (truncate === -1) truncate = maxModelLen;
  if (truncate !== null && truncate > maxModelLen) throw badRequest("truncate_prompt_tokens", `truncate_prompt_tokens must be ≤ the model's maximum context length ${maxModelLen}, got ${truncate}`);
  f.string("user");
  return { inputs, encodingFormat: format, dimensions, truncate };
}

/**
 * An encoded input cut to `k` tokens as Hugging Face tokenizers truncate
 * (right side), keeping its special-token wrap ([CLS] … [SEP]) when it has one;
 * token-id inputs keep their last k (vLLM's).
 */
export function truncateIds(ids: readonly number[], k: number, fromText: boolean, isSpecial: (id: number) => boolean): number[] {
  if (ids.length <= k) return [...ids];
  if (!fromText) return ids.slice(ids.length - k);
  const head = isSpecial(ids[0]!) ? 1 : 0;
  const tail = isSpecial(ids[ids.length - 1]!) ? 1 : 0;
  if (head + tail >= k) return ids.slice(0, k);
  return [...ids.slice(0, k - tail), ...ids.slice(ids.length - tail)];
}

/** A vector as OpenAI sends it: numbers, or base64 of its little-endian f32 bytes. */
export function encodeEmbedding(v: Float32Array, format: "float" | "base64"): number[] | string {
  if (format === "float") return Array.from(v);
  const bytes = Buffer.alloc(v.length * 4);
  for (let i = 0; i < v.length; i++) bytes.writeFloatLE(v[i]!, i * 4);
  return bytes.toString("base64");
}

/**
 * The bodies of the scoring routes, vLLM's shapes (protocol.py RerankRequest,
 * ScoreRequest), parsed into the text pairs to score; every bad field is a
 * 400 naming it.
 *
 *   POST /v1/rerank   (Jina / Cohere)  { model?, query: string, documents: (string | { text })[],
 *                                        top_n? (0 or absent: all; -1 too, as vLLM), return_documents? (default true) }
 *   POST /v1/score                     { model?, text_1: string | string[], text_2: string | string[] }
 *                                        1:1, 1:N (text_1 broadcast) or N:N pairs (vLLM's rule)
 *   both                               truncate_prompt_tokens? (vLLM's: -1 = the model's limit, k ≥ 1 = each
 *                                        cross-encoder pair, or each text of a bi-encoder, cut to k tokens),
 *                                      use_activation? (default true; false: a cross-encoder's raw logit)
 */
import { show } from "../errors.js";
import { badRequest } from "./errors.js";
import { type Fields, isObject } from "./fields.js";

/** At most this many pairs in one request (OpenAI's limit on embedding inputs, for the same reason: one body, one engine request). */
export const MAX_SCORE_PAIRS = 2048;

export interface ScorePair {
  /** The query (text_1). */
  a: string;
  /** The document (text_2). */
  b: string;
  /** The request field of the document, for errors ("documents[3]", "text_2[3]"). */
  param: string;
}

export interface RerankRequest {
  query: string;
  /** truncate_prompt_tokens resolved (-1 → the model's limit), or null: a pair beyond the context is a 400. */
  truncate: number | null;
  /** use_activation: false = a cross-encoder's raw logit (an embedding model's cosine is unchanged). */
  activation: boolean;
  documents: string[];
  /** How many of the best results to answer (all: documents.length). */
  topN: number;
  returnDocuments: boolean;
}

export interface ScoreRequest {
  pairs: ScorePair[];
  truncate: number | null;
  activation: boolean;
}

/** use_activation (vLLM's; its older name activation), default true; false: a cross-encoder's raw logit. Both given and differing: a 400. */
function parseActivation(f: Fields): boolean {
  const use = f.boolean("use_activation");
  const old = f.boolean("activation");
  if (use !== undefined && old !== undefined && use !== old) throw badRequest("activation", `activation (${old}) contradicts use_activation (${use}): give one`);
  return use ?? old ?? true;
}

/** truncate_prompt_tokens as vLLM validates it (-1 → maxModelLen; 0 or beyond maxModelLen → 400), or null when absent. */
export function parseTruncate(f: Fields, maxModelLen: number): number | null {
  const t = f.integer("truncate_prompt_tokens", { min: -1 }) ?? null;
  if (t === 0) throw badRequest("truncate_prompt_tokens", "truncate_prompt_tokens must be -1 (the model's limit) or ≥ 1, got 0");
  if (t === -1) return maxModelLen;
  if (t !== null && t > maxModelLen) throw badRequest("truncate_prompt_tokens", `truncate_prompt_tokens must be ≤ the model's maximum context length ${maxModelLen}, got ${t}`);
  return t;
}

function checkCount(param: string, n: number): void {
  if (n > MAX_SCORE_PAIRS) throw badRequest(param, `${param} must have at most ${MAX_SCORE_PAIRS} items, got ${n}`);
}

export function parseRerankRequest(f: Fields, maxModelLen: number): RerankRequest {
  const activation = parseActivation(f);
  const truncate = parseTruncate(f, maxModelLen);
  if (!f.has("query")) throw badRequest("query", "query is required: the text the documents are ranked against");
  const query = f.string("query")!;
  if (query.length === 0) throw badRequest("query", "query must not be empty");
  const raw = f.raw("documents");
  if (!Array.isArray(raw) || raw.length === 0) throw badRequest("documents", `documents must be a non-empty array of strings (or of { text } objects), got ${show(raw)}`);
  checkCount("documents", raw.length);
  const documents = raw.map((d: unknown, i) => {
    const text = typeof d === "string" ? d : isObject(d) && typeof d["text"] === "string" ? d["text"] : undefined;
    if (text === undefined) throw badRequest("documents", `documents[${i}] must be a string or an object with a string "text", got ${show(d)}`);
    if (text.length === 0) throw badRequest("documents", `documents[${i}] must not be empty`);
    return text;
  });
  const top = f.integer("top_n", { min: -1 }) ?? 0;
  return { query, documents, truncate, activation, topN: top <= 0 ? documents.length : Math.min(top, documents.length), returnDocuments: f.boolean("return_documents") ?? true };
}

function texts(f: Fields, name: string): string[] {
  if (!f.has(name)) throw badRequest(name, `${name} is required: a string or a non-empty array of strings`);
  const v = f.raw(name);
  const list = typeof v === "string" ? [v] : v;
  if (!Array.isArray(list) || list.length === 0 || list.some((s) => typeof s !== "string")) throw badRequest(name, `${name} must be a string or a non-empty array of strings, got ${show(v)}`);
  checkCount(name, list.length);
  list.forEach((s: string, i) => {
    if (s.length === 0) throw badRequest(name, `${name}${typeof v === "string" ? "" : `[${i}]`} must not be empty`);
  });
  return list as string[];
}

export function parseScoreRequest(f: Fields, maxModelLen: number): ScoreRequest {
  const activation = parseActivation(f);
  const truncate = parseTruncate(f, maxModelLen);
  const t1 = texts(f, "text_1");
  const t2 = texts(f, "text_2");
  if (t1.length !== 1 && t1.length !== t2.length) {
    throw badRequest("text_1", `text_1 and text_2 must pair 1:1, 1:N or N:N (vLLM's rule), got ${t1.length} and ${t2.length} texts`);
  }
  const list2 = Array.isArray(f.raw("text_2"));
  return { truncate, activation, pairs: t2.map((b, i) => ({ a: t1.length === 1 ? t1[0]! : t1[i]!, b, param: list2 ? `text_2[${i}]` : "text_2" })) };
}

// The /v1/embeddings body parser and helpers (server/embedding-request.ts),
// without a server: every input shape, `dimensions` on models with and
// without Matryoshka support, truncate_prompt_tokens, the truncation that
// keeps [CLS] … [SEP], and base64 as little-endian f32 bytes.
import assert from "node:assert/strict";
import { test } from "node:test";
import { HttpError } from "../../src/server/errors.js";
import { Fields } from "../../src/server/fields.js";
import { encodeEmbedding, parseEmbeddingRequest, truncateIds } from "../../src/server/embedding-request.js";

const PLAIN = { dimensions: 32, matryoshka: null, crossEncoder: false, architecture: "BertModel", tokenTypes: true };
const ANY = { dimensions: 32, matryoshka: "any" as const, crossEncoder: false, architecture: "BertModel", tokenTypes: true };
const parse = (body: unknown, info: typeof PLAIN | typeof ANY = PLAIN) => parseEmbeddingRequest(new Fields(body), info, 24);
const refused = (body: unknown, param: string, info: typeof PLAIN | typeof ANY = PLAIN): void =>
  assert.throws(() => parse(body, info), (e: unknown) => e instanceof HttpError && e.status === 400 && e.toJSON().error.param === param, JSON.stringify(body));

test("input: a string, strings, token ids, lists of token ids", () => {
  assert.deepEqual(parse({ input: "a" }).inputs, [{ text: "a" }]);
  assert.deepEqual(parse({ input: ["a", "b"] }).inputs, [{ text: "a" }, { text: "b" }]);
  assert.deepEqual(parse({ input: [5, 6] }).inputs, [{ tokens: [5, 6] }]);
  assert.deepEqual(parse({ input: [[5], [6, 7]] }).inputs, [{ tokens: [5] }, { tokens: [6, 7] }]);
  assert.deepEqual(parse({ input: "a" }).encodingFormat, "float");
  refused({ input: 5 }, "input");
  refused({ input: [["a"]] }, "input");
  refused({ input: [[]] }, "input");
  refused({ input: Array.from({ length: 2049 }, () => "a") }, "input");
});

test("dimensions: refused on a model without Matryoshka, any length ≤ hidden on one with is_matryoshka", () => {
  refused({ input: "a", dimensions: 16 }, "dimensions");
  assert.equal(parse({ input: "a", dimensions: 16 }, ANY).dimensions, 16);
  refused({ input: "a", dimensions: 33 }, "dimensions", ANY);
  refused({ input: "a", dimensions: 2.5 }, "dimensions", ANY);
});

test("truncate_prompt_tokens: -1 is the model's limit; 0 and beyond the limit are refused", () => {
  assert.equal(parse({ input: "a", truncate_prompt_tokens: -1 }).truncate, 24);
  assert.equal(parse({ input: "a", truncate_prompt_tokens: 5 }).truncate, 5);
  assert.equal(parse({ input: "a" }).truncate, null);
  refused({ input: "a", truncate_prompt_tokens: 0 }, "truncate_prompt_tokens");
  refused({ input: "a", truncate_prompt_tokens: -2 }, "truncate_prompt_tokens");
  refused({ input: "a", truncate_prompt_tokens: 25 }, "truncate_prompt_tokens");
});

test("truncateIds keeps a text's special wrap, and a token list's last k (vLLM's)", () => {
  const special = (id: number) => id === 101 || id === 102;
  assert.deepEqual(truncateIds([101, 1, 2, 3, 4, 102], 4, true, special), [101, 1, 2, 102]);
  assert.deepEqual(truncateIds([1, 2, 3, 4], 2, true, special), [1, 2]);
  assert.deepEqual(truncateIds([101, 1, 2, 3, 4, 102], 4, false, special), [2, 3, 4, 102]);
  assert.deepEqual(truncateIds([101, 1, 102], 4, true, special), [101, 1, 102]);
});

test("base64 is the vector's little-endian f32 bytes", () => {
  const v = Float32Array.from([1.5, -2, 1e-7]);
  const b = Buffer.from(encodeEmbedding(v, "base64") as string, "base64");
  assert.deepEqual([b.readFloatLE(0), b.readFloatLE(4), b.readFloatLE(8)], Array.from(v));
  assert.deepEqual(encodeEmbedding(v, "float"), Array.from(v));
});

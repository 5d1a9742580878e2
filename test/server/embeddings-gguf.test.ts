// `kvflash serve --model tiny-bert.gguf` (a llama.cpp-layout BERT GGUF file,
// src/testing/tiny-bert-gguf.ts, from a tiny random-weight sentence-transformers
// directory): /v1/embeddings through the official openai client gives the
// vectors of the float64 reference of the same weights (mean pooling from
// bert.pooling_type, normalized) within 1e-5, tokenized from the GGUF
// vocabulary; /v1/models names it; a bad file fails serve() naming the key.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { ArgumentError } from "../../src/errors.js";
import { encoderTokenizer } from "../../src/model/encoder/encoder-model.js";
import { gguf, writeGguf } from "../../src/sources/gguf/writer.js";
import { serve } from "../../src/server/start-server.js";
import { bertDirToGguf, writeBertGguf } from "../../src/testing/tiny-bert-gguf.js";
import { writeTinyBert } from "../../src/testing/tiny-bert.js";
import { cosine, referenceEmbedding } from "../model/encoder/bert-reference.js";
import { type ServerProcess, post, startServer } from "./harness.js";

const NAME = "tiny-bert-gguf";
const CFG = { hidden: 32, heads: 4, layers: 2, eps: 1e-12, gelu: "erf" as const };

let root: string;
let dir: string;
let file: string;
let server: ServerProcess;

before(async () => {
  root = mkdtempSync(join(tmpdir(), "kvflash-embed-gguf-"));
  dir = join(root, "tiny-minilm");
  writeTinyBert({ dir, seed: 12, hiddenSize: 32, numHeads: 4, numLayers: 2, maxPositionEmbeddings: 64, pooling: "mean", words: ["hello", "world", "café"] });
  file = join(root, "tiny-minilm-f32.gguf");
  writeBertGguf(dir, file);
  server = await startServer(["--model", file, "--served-model-name", NAME]);
});
after(async () => {
  await server?.stop();
  rmSync(root, { recursive: true, force: true });
});

test("serve --model x.gguf (arch bert): embeddings.create = the float64 reference of the same weights to 1e-5", async () => {
  const texts = ["Hello world", "Café, naïve punctuation!?", "unknownword ☃ x"];
  const r = await server.openai.embeddings.create({ model: NAME, input: texts, encoding_format: "float" });
  const b64 = await server.openai.embeddings.create({ model: NAME, input: texts });
  const tok = encoderTokenizer(dir); // tokenizer.json of the directory the file came from
  const tokens = texts.reduce((n, t) => n + tok.encode(t).length, 0);
  assert.deepEqual(r.usage, { prompt_tokens: tokens, total_tokens: tokens });
  texts.forEach((t, i) => {
    const ref = referenceEmbedding(dir, CFG, tok.encode(t), "mean", true);
    const err = Math.max(...ref.map((v, j) => Math.abs(v - r.data[i]!.embedding[j]!)));
    assert.ok(err <= 1e-5, `${JSON.stringify(t)}: max error ${err}`);
    assert.ok(cosine(b64.data[i]!.embedding, ref) >= 0.9999);
  });
  const models = await server.openai.models.list();
  assert.deepEqual(models.data.map((m) => m.id), [NAME]);
  // An encoder is not a text generator.
  const gen = await post(`${server.url}/v1/completions`, { model: NAME, prompt: "hi" });
  assert.equal(gen.status, 400);
});

test("serve() of a bad BERT GGUF (unknown pooling type) fails before any worker starts, naming the key", async () => {
  const o = bertDirToGguf(dir);
  o.metadata["bert.pooling_type"] = gguf.u32(9);
  const bad = join(root, "bad.gguf");
  writeGguf(bad, o);
  await assert.rejects(serve({ modelDir: bad, port: 0, threads: 1 }), (e: unknown) => e instanceof ArgumentError && e.argument.endsWith("bert.pooling_type") && /got 9/.test(e.message));
});

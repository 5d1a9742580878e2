// `kvflash serve --model base.gguf` for a GGUF without tokenizer.chat_template
// (a base model, an old conversion): the server logs the template it chose in
// one startup line and chats with it, as llama-server does, instead of
// answering every chat request with a 400 about tokenizer_config.json and an
// internal "templateName". The tiny Llama's vocabulary has Llama 3's header
// tokens, so the fallback is Llama 3's format; the prompt the server encodes
// is exactly that rendering.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import OpenAI from "openai";
import { readModelMetadata } from "../../src/model/model-metadata.js";
import { convertModelDirToGguf } from "../../src/model/gguf/convert.js";
import { writeTinyModel } from "../../src/testing/index.js";
import { type ServerProcess, startServer } from "./harness.js";

const NAME = "base-gguf";
let root: string;
let dir: string;
let server: ServerProcess;

before(async () => {
  root = mkdtempSync(join(tmpdir(), "kvflash-template-fallback-serve-"));
  dir = writeTinyModel(join(root, "hf"), { arch: "llama", seed: 4, hiddenSize: 64, intermediateSize: 128, numLayers: 2, numHeads: 4, numKvHeads: 2, maxPositionEmbeddings: 1024 }).dir;
  const path = join(dir, "tokenizer_config.json");
  const { chat_template: _dropped, ...config } = JSON.parse(readFileSync(path, "utf8")) as Record<string, unknown>;
  writeFileSync(path, JSON.stringify(config));
  const gguf = join(root, "base-Q8_0.gguf");
  convertModelDirToGguf(dir, gguf, { type: "Q8_0" });
  server = await startServer(["--model", gguf, "--served-model-name", NAME, "--num-gpu-blocks-override", "64"]);
});
after(async () => {
  assert.equal(await server.stop(), 0, server.stderr());
  rmSync(root, { recursive: true, force: true });
});

test("the chosen template is logged once at startup", () => {
  const lines = server.stderr().split("\n").filter((l) => l.includes("chat template"));
  assert.deepEqual(lines, ["kvflash: chat template: fallback llama3 (the Llama 3 format: the vocabulary has <|start_header_id|> <|end_header_id|> <|eot_id|>)"]);
});

test("chat and /tokenize render the fallback template: the prompt is Llama 3's format, encoded", async () => {
  const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello there" }];
  const expected = readModelMetadata({ kind: "dir", path: dir }).tokenizer;
  const text = expected.applyChatTemplate(messages as never);
  assert.equal(text, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello there<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  const ids = expected.encode(text, { addSpecialTokens: false });
  const r = await server.openai.chat.completions.create({ model: NAME, messages, max_tokens: 3, temperature: 0 });
  assert.equal(r.usage?.prompt_tokens, ids.length);
  assert.equal(typeof r.choices[0]!.message.content, "string");
  const root = new OpenAI({ baseURL: server.url, apiKey: "unused", maxRetries: 0 });
  const tokenized = await root.post<{ tokens: number[] }>("/tokenize", { body: { model: NAME, messages } });
  assert.deepEqual(tokenized.tokens, ids);
});

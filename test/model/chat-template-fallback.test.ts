// The chat template of a model that ships none (model/chat-template-fallback.ts):
// the family's format, told by the vocabulary or the architecture, else
// llama-server's ChatML. Each fallback renders exactly what the family's own
// template renders (Meta's Llama 3 and Llama 2 Chat templates, Qwen3's,
// Mistral Instruct's), where that template accepts the conversation; the
// [INST] formats also fold a system message in. A GGUF's own
// tokenizer.chat_template (and .NAME ones) are used and named as such; without one, the GGUF
// and a Hugging Face directory get the fallback, through every reader
// (readModelMetadata for the server, openModelDir / openGgufModel for the loader).
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { type ChatMessage, ArgumentError, Tokenizer, renderChatTemplate } from "../../src/ops-entry.js";
import { openGgufModel } from "../../src/model/gguf/gguf-model.js";
import { openModelDir } from "../../src/model/model-dir.js";
import { readModelMetadata } from "../../src/model/model-metadata.js";
import { CHATML_TEMPLATE, fallbackChatTemplate } from "../../src/model/chat-template-fallback.js";
import { convertModelDirToGguf } from "../../src/model/gguf/convert.js";
import { GgufMetadata } from "../../src/sources/gguf/metadata.js";
import { readGgufHeader } from "../../src/sources/gguf/reader.js";
import { ggufTokenizer } from "../../src/sources/gguf/tokenizer.js";
import { LLAMA2_CHAT_TEMPLATE, writeTinyModel } from "../../src/testing/index.js";
import { buildTinyTokenizer } from "../../src/testing/tiny-tokenizer.js";
import { realTokenizerDir } from "../tokenizer/real-tokenizers.js";

const ALTERNATING: ChatMessage[] = [
  { role: "user", content: "Hi!" },
  { role: "assistant", content: "Hello." },
  { role: "user", content: "Bye" },
];
const WITH_SYSTEM: ChatMessage[] = [{ role: "system", content: "Be kind." }, ...ALTERNATING];

type Json = Record<string, unknown>;

/** A tokenizer of `dir`'s files with its chat template removed, given `architecture`'s fallback. */
function withoutTemplate(files: { tokenizerJson: unknown; tokenizerConfig: Json }, architecture: string): Tokenizer {
  const { chat_template: _dropped, ...config } = files.tokenizerConfig;
  return new Tokenizer({ tokenizerJson: files.tokenizerJson, tokenizerConfig: config, fallbackChatTemplate: (t) => fallbackChatTemplate(architecture, t) });
}

function realFiles(pkg: "llama2" | "llama3" | "qwen3"): { tokenizerJson: unknown; tokenizerConfig: Json } {
  const dir = realTokenizerDir(pkg);
  return { tokenizerJson: JSON.parse(readFileSync(join(dir, "tokenizer.json"), "utf8")), tokenizerConfig: JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8")) as Json };
}

test("a Llama 3 vocabulary gets Llama 3's format: what Meta's template renders", () => {
  const files = realFiles("llama3");
  const own = new Tokenizer(files);
  const fallback = withoutTemplate(files, "LlamaForCausalLM");
  assert.match(fallback.chatTemplateOrigin!, /^fallback llama3 \(the Llama 3 format: the vocabulary has <\|start_header_id\|> <\|end_header_id\|> <\|eot_id\|>\)$/);
  assert.equal(fallback.applyChatTemplate(WITH_SYSTEM), own.applyChatTemplate(WITH_SYSTEM));
  assert.equal(
    fallback.applyChatTemplate(ALTERNATING, { addGenerationPrompt: false }),
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>",
  );
});

test("a ChatML vocabulary gets ChatML (llama.cpp's CHATML_TEMPLATE_SRC): what Qwen3's template renders", () => {
  const files = realFiles("qwen3");
  const fallback = withoutTemplate(files, "Qwen3ForCausalLM");
  assert.match(fallback.chatTemplateOrigin!, /^fallback chatml \(the ChatML format: the vocabulary has <\|im_start\|> <\|im_end\|>\)$/);
  assert.equal(fallback.chatTemplate, CHATML_TEMPLATE);
  assert.equal(fallback.applyChatTemplate(WITH_SYSTEM), new Tokenizer(files).applyChatTemplate(WITH_SYSTEM));
});

test("[INST] families: Mistral by vocabulary or architecture, Llama 2 by LlamaForCausalLM with <s>; a system message is folded in", () => {
  const mistralFiles = buildTinyTokenizer("mistral", 50);
  const byVocabulary = withoutTemplate(mistralFiles, "LlamaForCausalLM");
  assert.match(byVocabulary.chatTemplateOrigin!, /^fallback mistral \(the Mistral format: the vocabulary has \[INST\] \[\/INST\]\)$/);
  assert.equal(byVocabulary.applyChatTemplate(ALTERNATING), renderChatTemplate(mistralFiles.tokenizerConfig["chat_template"] as string, ALTERNATING, {}, { bos_token: "<s>", eos_token: "</s>" }));
  assert.equal(byVocabulary.applyChatTemplate(WITH_SYSTEM), "<s>[INST] Be kind.\n\nHi! [/INST]Hello.</s>[INST] Bye [/INST]");

  const spm = realFiles("llama2"); // SentencePiece, <s> BOS, no [INST] tokens, no template
  const mistral = withoutTemplate(spm, "MistralForCausalLM");
  assert.equal(mistral.chatTemplateOrigin, "fallback mistral (the Mistral family's format, by architecture)");
  const llama2 = withoutTemplate(spm, "LlamaForCausalLM");
  assert.equal(llama2.chatTemplateOrigin, "fallback llama2 (the Llama 2 format: LlamaForCausalLM with the <s> BOS token)");
  const special = { bos_token: "<s>", eos_token: "</s>" };
  assert.equal(llama2.applyChatTemplate(WITH_SYSTEM), renderChatTemplate(LLAMA2_CHAT_TEMPLATE, WITH_SYSTEM, {}, special));
  assert.equal(llama2.applyChatTemplate(ALTERNATING), renderChatTemplate(LLAMA2_CHAT_TEMPLATE, ALTERNATING, {}, special));
  assert.equal(llama2.applyChatTemplate(WITH_SYSTEM), "<s>[INST] <<SYS>>\nBe kind.\n<</SYS>>\n\nHi! [/INST] Hello. </s><s>[INST] Bye [/INST]");
});

test("otherwise ChatML, llama-server's default; the model's own template always wins", () => {
  const spm = realFiles("llama2");
  assert.equal(withoutTemplate(spm, "Qwen2ForCausalLM").chatTemplateOrigin, "fallback chatml (the Qwen family's format, by architecture)");
  const other = withoutTemplate(spm, "GPTNeoXForCausalLM");
  assert.equal(other.chatTemplateOrigin, "fallback chatml (llama-server's default)");
  assert.equal(other.applyChatTemplate([{ role: "user", content: "Hi" }]), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  const asked: string[] = [];
  const own = new Tokenizer({ ...realFiles("llama3"), fallbackChatTemplate: (t) => (asked.push("x"), fallbackChatTemplate("LlamaForCausalLM", t)) });
  assert.deepEqual(asked, []);
  assert.equal(own.chatTemplateOrigin, "tokenizer tokenizer_config.json chat_template");
});

test("no template and no fallback: the error names the model, not an internal option", () => {
  const { chat_template: _dropped, ...config } = realFiles("qwen3").tokenizerConfig;
  const bare = new Tokenizer({ tokenizerJson: realFiles("qwen3").tokenizerJson, tokenizerConfig: config, source: "/models/qwen3" });
  assert.equal(bare.chatTemplateOrigin, null);
  assert.throws(
    () => bare.applyChatTemplate(ALTERNATING),
    (e: Error) => e instanceof ArgumentError && e.message === "messages cannot be rendered: /models/qwen3 has no chat template" && !/templateName|tokenizer_config/.test(e.message),
  );
});

let root: string;
let dir: string;
let bareDir: string;
before(() => {
  root = mkdtempSync(join(tmpdir(), "kvflash-template-fallback-"));
  const shape = { arch: "llama", hiddenSize: 32, intermediateSize: 64, numLayers: 1, numHeads: 2, numKvHeads: 1 } as const;
  dir = writeTinyModel(join(root, "own"), shape).dir;
  bareDir = writeTinyModel(join(root, "bare"), shape).dir;
  const path = join(bareDir, "tokenizer_config.json");
  const { chat_template: _dropped, ...config } = JSON.parse(readFileSync(path, "utf8")) as Json;
  writeFileSync(path, JSON.stringify(config));
});
after(() => rmSync(root, { recursive: true, force: true }));

test("a GGUF's tokenizer.chat_template[.NAME] are its templates, named as such; without one, GGUF and directory readers all give the fallback", () => {
  const own = join(root, "own.gguf");
  convertModelDirToGguf(dir, own, { type: "Q8_0" });
  const template = (JSON.parse(readFileSync(join(dir, "tokenizer_config.json"), "utf8")) as Json)["chat_template"];
  const meta = readModelMetadata({ kind: "gguf", path: own });
  assert.equal(meta.tokenizer.chatTemplate, template);
  assert.equal(meta.tokenizer.chatTemplateOrigin, `${own} tokenizer.chat_template`);
  assert.equal(openGgufModel(own).tokenizer.chatTemplateOrigin, `${own} tokenizer.chat_template`);

  // Named templates (gguf-py writes a list of them as tokenizer.chat_template.NAME): tools pick "tool_use", as in transformers.
  const named = new Map(readGgufHeader(own).metadata);
  named.set("tokenizer.chat_template.tool_use", "TOOLS:{{ tools | length }}");
  named.set("tokenizer.chat_templates", ["tool_use"]);
  const withTools = ggufTokenizer(new GgufMetadata(named, own));
  assert.deepEqual(Object.keys(withTools.chatTemplates).sort(), ["default", "tool_use"]);
  assert.equal(withTools.applyChatTemplate([{ role: "user", content: "Hi" }], { tools: [{}, {}] }), "TOOLS:2");
  assert.equal(withTools.chatTemplate, template);
  named.set("tokenizer.chat_template.tool_use", "{% if %}");
  assert.throws(() => ggufTokenizer(new GgufMetadata(named, own)), /own\.gguf tokenizer\.chat_template\.tool_use does not parse as Jinja/);

  const bare = join(root, "bare.gguf");
  convertModelDirToGguf(bareDir, bare, { type: "Q8_0" });
  const expected = "fallback llama3 (the Llama 3 format: the vocabulary has <|start_header_id|> <|end_header_id|> <|eot_id|>)";
  for (const tokenizer of [readModelMetadata({ kind: "gguf", path: bare }).tokenizer, openGgufModel(bare).tokenizer, readModelMetadata({ kind: "dir", path: bareDir }).tokenizer, openModelDir(bareDir).tokenizer]) {
    assert.equal(tokenizer.chatTemplateOrigin, expected);
    assert.equal(tokenizer.applyChatTemplate([{ role: "user", content: "Hi" }]), "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  }
});

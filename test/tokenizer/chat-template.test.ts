// Chat templates run by @huggingface/jinja under apply_chat_template semantics.
// The expected strings were rendered by Python Jinja2 3.1.6 in transformers'
// environment (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks,
// loopcontrols, raise_exception, tojson = json.dumps) from the same
// tokenizer_config.json files.
import assert from "node:assert/strict";
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { ArgumentError, serve } from "../../src/index.js";
import { Tokenizer, renderChatTemplate } from "../../src/ops-entry.js";
import { LLAMA2_CHAT_TEMPLATE, writeTinyModel } from "../../src/testing/index.js";
import { realTokenizerDir } from "./real-tokenizers.js";

const llama3 = Tokenizer.fromDir(realTokenizerDir("llama3"));
const qwen3 = Tokenizer.fromDir(realTokenizerDir("qwen3"));

/** A three-token BPE tokenizer.json with no chat template anywhere. */
const MINIMAL_BPE = { version: "1.0", added_tokens: [], normalizer: null, pre_tokenizer: null, post_processor: null, decoder: null, model: { type: "BPE", vocab: { a: 0, b: 1, ab: 2 }, merges: ["a b"] } };

const CONVERSATION = [
  { role: "system", content: "You are kind." },
  { role: "user", content: "Hi!" },
  { role: "assistant", content: "<think>\nhmm\n</think>\n\nHello." },
  { role: "user", content: "Bye" },
];

test("Qwen3: ChatML, earlier reasoning stripped, enable_thinking=false, tools and tool calls", () => {
  assert.equal(
    qwen3.applyChatTemplate(CONVERSATION),
    "<|im_start|>system\nYou are kind.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n",
  );
  assert.equal(
    qwen3.applyChatTemplate([{ role: "user", content: "  Hi!  " }], { variables: { enable_thinking: false } }),
    "<|im_start|>user\n  Hi!  <|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
  );
  const tools = [{ type: "function", function: { name: "get_weather", description: "Weather", parameters: { type: "object", properties: { city: { type: "string" } } } } }];
  const rendered = qwen3.applyChatTemplate(
    [
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: "", tool_calls: [{ type: "function", function: { name: "get_weather", arguments: { city: "Paris" } } }] },
      { role: "tool", content: "sunny" },
    ],
    { tools },
  );
  assert.equal(
    rendered,
    '<|im_start|>system\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\nsunny\n</tool_response><|im_end|>\n<|im_start|>assistant\n',
  );
  // Without the generation prompt the text ends after the last turn.
  assert.ok(qwen3.applyChatTemplate(CONVERSATION, { addGenerationPrompt: false }).endsWith("Bye<|im_end|>\n"));
});

test("Llama 3: headers, bos_token from tokenizer_config, trimmed content", () => {
  assert.equal(
    llama3.applyChatTemplate(CONVERSATION),
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are kind.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n<think>\nhmm\n</think>\n\nHello.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
  );
  assert.equal(
    llama3.applyChatTemplate([{ role: "user", content: "  Hi!  " }]),
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
  );
});

test("encodeChat does not add a second BOS: the template writes its own", () => {
  const ids = llama3.encodeChat([{ role: "user", content: "Hi!" }]);
  assert.deepEqual(ids.slice(0, 2), [128000, 128006]);
  assert.equal(ids.filter((id) => id === 128000).length, 1);
  assert.equal(ids.at(-1), 271); // "\n\n" after <|end_header_id|>
  assert.deepEqual(ids.slice(-3, -1), [78191, 128007]); // "assistant", <|end_header_id|>
});

test("Llama 2 chat template: system block, alternation enforced through raise_exception", () => {
  const special = { bos_token: "<s>", eos_token: "</s>" };
  assert.equal(
    renderChatTemplate(LLAMA2_CHAT_TEMPLATE, [
      { role: "system", content: "Be brief." },
      { role: "user", content: " Hi " },
      { role: "assistant", content: "Hello!" },
      { role: "user", content: "Bye" },
    ], {}, special),
    "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n Hi [/INST] Hello! </s><s>[INST] Bye [/INST]", // strip() trims the whole block, not the user text
  );
  assert.throws(
    () => renderChatTemplate(LLAMA2_CHAT_TEMPLATE, [{ role: "user", content: "a" }, { role: "user", content: "b" }], {}, special),
    /messages were rejected by the chat template: .*Conversation roles must alternate/,
  );
});

test("OpenAI content parts are joined; non-text parts, missing templates and bad names are errors", () => {
  const parts = [{ role: "user", content: [{ type: "text", text: "one" }, { type: "text", text: "two" }] }];
  assert.equal(qwen3.applyChatTemplate(parts), "<|im_start|>user\none\ntwo<|im_end|>\n<|im_start|>assistant\n");
  assert.throws(() => qwen3.applyChatTemplate([{ role: "user", content: [{ type: "image_url", image_url: "x" }] }]), /messages\[0\]\.content\[0\] must be a text part/);
  assert.throws(() => qwen3.applyChatTemplate([{ content: "x" } as never]), /messages\[0\] must be an object with a string role/);
  assert.throws(() => qwen3.applyChatTemplate(CONVERSATION, { templateName: "rag" }), /templateName must be one of "default", got "rag"/);
  const bare = new Tokenizer({ tokenizerJson: MINIMAL_BPE, tokenizerConfig: {} });
  assert.equal(bare.chatTemplate, null);
  assert.throws(() => bare.applyChatTemplate(CONVERSATION), /this tokenizer has no chat template/);
  assert.throws(() => renderChatTemplate("{% if %}", []), /chat_template does not parse as Jinja/);
});

test("named templates in tokenizer_config and a chat_template.jinja file beside it", () => {
  const dir = mkdtempSync(join(tmpdir(), "kvflash-tpl-"));
  try {
    const src = realTokenizerDir("qwen3");
    copyFileSync(join(src, "tokenizer.json"), join(dir, "tokenizer.json"));
    writeFileSync(
      join(dir, "tokenizer_config.json"),
      JSON.stringify({ eos_token: "<|im_end|>", chat_template: [{ name: "default", template: "D:{{ messages[0].content }}" }, { name: "tool_use", template: "T:{{ tools | length }}" }] }),
    );
    const named = Tokenizer.fromDir(dir);
    assert.equal(named.applyChatTemplate([{ role: "user", content: "x" }]), "D:x");
    assert.equal(named.applyChatTemplate([{ role: "user", content: "x" }], { tools: [1, 2] }), "T:2", "tools pick the tool_use template");
    writeFileSync(join(dir, "chat_template.jinja"), "J:{{ messages | length }}{{ eos_token }}");
    assert.equal(Tokenizer.fromDir(dir).applyChatTemplate([{ role: "user", content: "x" }]), "J:1<|im_end|>");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a chat template that does not parse fails the tokenizer's load, naming the file and the parser's message", () => {
  const dir = mkdtempSync(join(tmpdir(), "kvflash-tpl-"));
  try {
    writeFileSync(join(dir, "tokenizer.json"), JSON.stringify(MINIMAL_BPE));
    writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify({ chat_template: "{% for m in messages %}{{ m.content }}" }));
    assert.throws(
      () => Tokenizer.fromDir(dir),
      (e: Error) => e instanceof ArgumentError && e.argument === `${dir} tokenizer_config.json chat_template` && /does not parse as Jinja: \S/.test(e.message),
    );
    writeFileSync(
      join(dir, "tokenizer_config.json"),
      JSON.stringify({ chat_template: [{ name: "default", template: "ok" }, { name: "tool_use", template: "{% if %}" }] }),
    );
    assert.throws(() => Tokenizer.fromDir(dir), /tokenizer_config\.json chat_template\[1\] \("tool_use"\) does not parse as Jinja: Unexpected token/);
    // chat_template.jinja overrides the config's default, so only the file's text is compiled.
    writeFileSync(join(dir, "tokenizer_config.json"), JSON.stringify({ chat_template: "{% if %}" }));
    writeFileSync(join(dir, "chat_template.jinja"), "J:{{ messages | length }}");
    assert.equal(Tokenizer.fromDir(dir).applyChatTemplate([{ role: "user", content: "x" }]), "J:1");
    writeFileSync(join(dir, "chat_template.jinja"), "{{ messages[0] ");
    assert.throws(() => Tokenizer.fromDir(dir), new RegExp(`^ArgumentError: ${dir.replace(/[\\^$.*+?()[\]{}|]/g, "\\$&")} chat_template\.jinja does not parse as Jinja: Unexpected end of input`));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("serve refuses a model whose chat template does not parse, before listening", { timeout: 30_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "kvflash-tpl-serve-"));
  try {
    writeTinyModel(dir, { arch: "qwen3", hiddenSize: 32, intermediateSize: 64, numLayers: 1, numHeads: 2, numKvHeads: 1 });
    writeFileSync(join(dir, "chat_template.jinja"), "{% for m in messages %}{{ m.content }}");
    // A server that starts anyway is stopped at once, so the assertion below fails rather than hangs.
    const outcome = await serve({ modelDir: dir, port: 0 }).then(
      async (s) => (await s.close(), "the server started"),
      (e: Error) => e.message,
    );
    assert.match(outcome, /chat_template\.jinja does not parse as Jinja: /);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

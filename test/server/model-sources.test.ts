// Every kind of model source, served and driven by the official openai
// client (issue 24, "bring your own model"): a Hugging Face directory, a
// local GGUF file, a hub repository (safetensors), a hub GGUF by quant
// (org/name:Q8_0), and that GGUF again from the cache with HF_HUB_OFFLINE=1.
// Each is resolved as `kvflash serve --model` resolves it
// (resolveModelSource, against a mock hub on 127.0.0.1) and served in process
// on port 0; each answers a text completion, a streamed chat, /tokenize, a
// json_schema request and a named tool call. The model is one tiny Qwen2
// whose chat template renders tools (Hermes <tool_call>), so the GGUF
// sources only pass when the template they carry in tokenizer.chat_template
// is the one used. Last, serve({ modelDir }) with a local .gguf path: the
// library's path form, resolved once at that call.
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import OpenAI from "openai";
import { convertModelDirToGguf } from "../../src/model/gguf/convert.js";
import { type HubSettings, hubSettings } from "../../src/sources/hub/hub-settings.js";
import { type ResolvedModel, resolveModelSource } from "../../src/sources/source.js";
import { serve } from "../../src/server/start-server.js";
import { writeTinyModel } from "../../src/testing/index.js";
import { Tokenizer } from "../../src/tokenizer/tokenizer.js";
import { MockHub, readTree } from "../helpers/mock-hub.js";

/** ChatML with Qwen2.5's tool block: tools listed in a system turn, calls written as <tool_call>{json}</tool_call>. */
export const TOOL_CHATML =
  "{%- if tools %}<|im_start|>system\nYou may call functions.\n<tools>{% for tool in tools %}\n{{ tool | tojson }}{% endfor %}\n</tools>\n" +
  'For each call write <tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n{% endif %}' +
  "{%- for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + (message['content'] or '') + '<|im_end|>\\n' }}{% endfor %}" +
  "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

const NAME = "tiny";
let root: string;
let dir: string;
let gguf: string;
let hub: MockHub;
let cacheDir: string;
let hfTokenizer: Tokenizer;

before(async () => {
  root = mkdtempSync(join(tmpdir(), "kvflash-model-sources-"));
  dir = writeTinyModel(join(root, "hf"), {
    arch: "qwen2",
    seed: 11,
    hiddenSize: 64,
    intermediateSize: 128,
    numLayers: 2,
    numHeads: 4,
    numKvHeads: 2,
    maxPositionEmbeddings: 1024,
    embeddingStd: 0.3,
  }).dir;
  const configPath = join(dir, "tokenizer_config.json");
  writeFileSync(configPath, JSON.stringify({ ...(JSON.parse(readFileSync(configPath, "utf8")) as object), chat_template: TOOL_CHATML }));
  gguf = join(root, "tiny-Q8_0.gguf");
  convertModelDirToGguf(dir, gguf, { type: "Q8_0" });
  hfTokenizer = Tokenizer.fromDir(dir);
  hub = await MockHub.start();
  hub.addCommit("org/tiny", readTree(dir));
  hub.addCommit("org/tiny-GGUF", new Map([["tiny-Q8_0.gguf", readFileSync(gguf)]]));
  cacheDir = join(root, "cache");
});
after(async () => {
  await hub.close();
  rmSync(root, { recursive: true, force: true });
});

function settings(env: Record<string, string> = {}): HubSettings {
  return hubSettings({ HF_HOME: join(root, "home"), HF_HUB_CACHE: cacheDir, HF_ENDPOINT: hub.url, ...env });
}

const WEATHER: OpenAI.ChatCompletionTool = {
  type: "function",
  function: {
    name: "get_weather",
    parameters: { type: "object", properties: { city: { enum: ["Paris", "Oslo", "Lima"] }, days: { type: "integer", minimum: 1, maximum: 7 } }, required: ["city", "days"], additionalProperties: false },
  },
};
const PERSON = {
  type: "object",
  properties: { name: { type: "string", minLength: 1, maxLength: 6 }, age: { type: "integer", minimum: 18, maximum: 99 } },
  required: ["name", "age"],
  additionalProperties: false,
};

/** Serves `resolved` in process and runs the five requests through the openai client. */
async function exercise(resolved: ResolvedModel, kind: "dir" | "gguf"): Promise<void> {
  assert.equal(resolved.source.kind, kind);
  const running = await serve({ source: resolved.source, port: 0, servedModelNames: [NAME], numBlocks: 64, blockSize: 16, threads: 1, maxNumSeqs: 4 });
  try {
    await running.ready;
    const openai = new OpenAI({ baseURL: `${running.url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
    const rootClient = new OpenAI({ baseURL: running.url, apiKey: "unused", maxRetries: 0, timeout: 60_000 });

    const models = await openai.models.list();
    assert.deepEqual(models.data.map((m) => [m.id, (m as unknown as { root: string }).root]), [[NAME, resolved.source.path]]);

    const completion = await openai.completions.create({ model: NAME, prompt: "Hello world", max_tokens: 4, temperature: 0, ignore_eos: true } as OpenAI.CompletionCreateParamsNonStreaming);
    assert.equal(completion.usage?.prompt_tokens, hfTokenizer.encode("Hello world").length);
    assert.equal(completion.usage?.completion_tokens, 4);
    assert.equal(typeof completion.choices[0]!.text, "string");

    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "Say hi" }];
    const stream = await openai.chat.completions.create({ model: NAME, messages, max_tokens: 5, temperature: 0, stream: true, stream_options: { include_usage: true } });
    let text = "";
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
      usage = chunk.usage ?? usage;
    }
    assert.ok(finish === "stop" || finish === "length", `finish_reason ${finish}`);
    const rendered = hfTokenizer.encodeChat(messages as never);
    assert.equal(usage?.prompt_tokens, rendered.length, "the prompt is the model's own template, rendered and encoded");
    const nonStreamed = await openai.chat.completions.create({ model: NAME, messages, max_tokens: 5, temperature: 0 });
    assert.equal(text, nonStreamed.choices[0]!.message.content);

    const tokenized = await rootClient.post<{ tokens: number[]; count: number }>("/tokenize", { body: { model: NAME, prompt: "Hello world, tokens!" } });
    assert.deepEqual(tokenized.tokens, hfTokenizer.encode("Hello world, tokens!"));
    const chatTokens = await rootClient.post<{ tokens: number[] }>("/tokenize", { body: { model: NAME, messages } });
    assert.deepEqual(chatTokens.tokens, rendered);

    const json = await openai.chat.completions.create({
      model: NAME,
      messages: [{ role: "user", content: "A person as JSON" }],
      max_tokens: 120,
      seed: 3,
      response_format: { type: "json_schema", json_schema: { name: "person", schema: PERSON, strict: true } },
    });
    assert.equal(json.choices[0]!.finish_reason, "stop", json.choices[0]!.message.content ?? "");
    const person = JSON.parse(json.choices[0]!.message.content!) as { name: string; age: number };
    assert.deepEqual(Object.keys(person), ["name", "age"]);
    assert.ok(person.name.length >= 1 && person.name.length <= 6 && Number.isInteger(person.age) && person.age >= 18 && person.age <= 99, JSON.stringify(person));

    const called = await openai.chat.completions.create({
      model: NAME,
      messages: [{ role: "user", content: "Weather in Oslo?" }],
      tools: [WEATHER],
      tool_choice: { type: "function", function: { name: "get_weather" } },
      max_tokens: 400,
      temperature: 0,
    });
    const choice = called.choices[0]!;
    assert.equal(choice.finish_reason, "stop", JSON.stringify(choice.message)); // a named choice finishes "stop", as OpenAI's does
    const calls = choice.message.tool_calls as OpenAI.ChatCompletionMessageFunctionToolCall[];
    assert.ok(calls.length >= 1);
    for (const c of calls) {
      assert.equal(c.function.name, "get_weather");
      const args = JSON.parse(c.function.arguments) as { city: string; days: number };
      assert.ok(["Paris", "Oslo", "Lima"].includes(args.city) && Number.isInteger(args.days) && args.days >= 1 && args.days <= 7, c.function.arguments);
    }
  } finally {
    await running.close();
  }
}

test("a Hugging Face directory", { timeout: 120_000 }, async () => {
  await exercise(await resolveModelSource(dir), "dir");
});

test("a local GGUF file", { timeout: 120_000 }, async () => {
  await exercise(await resolveModelSource(gguf), "gguf");
});

test("a hub repository (safetensors), downloaded into the cache", { timeout: 120_000 }, async () => {
  const resolved = await resolveModelSource("org/tiny", { settings: settings(), progress: false });
  assert.equal(resolved.from, "hub");
  await exercise(resolved, "dir");
});

test("a hub GGUF by quant (org/name:Q8_0), downloaded into the cache", { timeout: 120_000 }, async () => {
  const resolved = await resolveModelSource("org/tiny-GGUF:Q8_0", { settings: settings(), progress: false });
  assert.equal(resolved.from, "hub");
  await exercise(resolved, "gguf");
});

test("the cached hub GGUF with HF_HUB_OFFLINE=1: no request reaches the hub", { timeout: 120_000 }, async () => {
  await resolveModelSource("org/tiny-GGUF:Q8_0", { settings: settings(), progress: false }); // cached (again, if run alone)
  hub.requests.length = 0;
  const resolved = await resolveModelSource("org/tiny-GGUF:q8_0", { settings: settings({ HF_HUB_OFFLINE: "1" }), progress: false });
  assert.equal(resolved.from, "cache");
  await exercise(resolved, "gguf");
  assert.deepEqual(hub.requests, []);
});

test("serve({ modelDir }) still takes a local path, resolved once at that call: a .gguf path serves the GGUF", { timeout: 120_000 }, async () => {
  const running = await serve({ modelDir: gguf, port: 0, numBlocks: 16, threads: 1 });
  try {
    await running.ready;
    assert.deepEqual(running.server.context.source, { kind: "gguf", path: gguf });
    const rootClient = new OpenAI({ baseURL: running.url, apiKey: "unused", maxRetries: 0 });
    const tokenized = await rootClient.post<{ tokens: number[] }>("/tokenize", { body: { prompt: "Hello world" } });
    assert.deepEqual(tokenized.tokens, hfTokenizer.encode("Hello world"));
  } finally {
    await running.close();
  }
  await assert.rejects(serve({ modelDir: join(root, "nowhere"), port: 0 }), /^ArgumentError: modelDir ".*nowhere": no such file or directory$/);
  await assert.rejects(serve({ modelDir: gguf, source: { kind: "dir", path: dir }, port: 0 }), /modelDir and source both name the model: give one/);
});

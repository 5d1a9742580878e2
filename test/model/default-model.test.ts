// The embedded default model (models/default, issue #15): a small Llama trained on WordNet
// dictionary conversations. It loads with nothing but this repository, through the ordinary
// loader, and it answers: greedy decoding is deterministic, so these answers are fixed
// facts of the committed weights (retraining may change the wording, not the checks).
import assert from "node:assert/strict";
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { type Runtime, createRuntime, generate, loadModel, loadModelDir, resolveSamplingParams, samplingDefaults } from "../../src/ops-entry.js";
import { defaultModelDir } from "../../src/index.js";

let rt: Runtime;
before(async () => {
  rt = await createRuntime({ threads: 1 });
});
after(async () => {
  await rt.dispose();
});

test("the default model loads from the repository alone: Llama, its 4096-token tokenizer and chat template, ≤ 30 MB", () => {
  const dir = defaultModelDir();
  const total = readdirSync(dir).reduce((s, f) => s + statSync(join(dir, f)).size, 0);
  assert.ok(total < 30 << 20, `models/default is ${total} bytes`);
  const m = loadModelDir(rt, dir, { progress: false });
  const c = m.config;
  assert.deepEqual(
    [c.architecture, c.hiddenSize, c.intermediateSize, c.numLayers, c.numHeads, c.numKvHeads, c.headDim, c.vocabSize, c.tieWordEmbeddings],
    ["LlamaForCausalLM", 256, 704, 4, 4, 2, 64, 4096, true],
  );
  assert.equal(m.tensors.size, 1 + 4 * 9 + 1);
  assert.ok([...m.tensors.values()].every((t) => t.dtype === "bf16"));
  assert.deepEqual(m.eosTokenIds, [2]);
  const ids = m.tokenizer.encodeChat([{ role: "system", content: "Be brief." }, { role: "user", content: " Hi there " }]);
  assert.equal(ids[0], 1);
  // Llama 2's legacy normalizer prepends "▁" to each piece of text between special tokens, as in training.
  assert.equal(m.tokenizer.decode(ids), "<s><|system|> Be brief.<|user|> Hi there<|assistant|>");
  m.free();
});

test("the tokenizer round-trips the held-out conversations exactly, bytes outside its alphabet included", () => {
  const m = loadModelDir(rt, defaultModelDir(), { progress: false });
  const lines = readFileSync(join(defaultModelDir(), "..", "..", "tools", "train-default-model", "heldout.jsonl"), "utf8").trim().split("\n");
  const texts = lines.slice(0, 50).flatMap((l) => (JSON.parse(l) as { messages: { content: string }[] }).messages.map((x) => x.content));
  texts.push("naïve café — 東京 🙂 ﬁ", "  two  spaces\tand a tab\n");
  for (const text of texts) {
    const ids = m.tokenizer.encode(text, { addSpecialTokens: false });
    assert.equal(m.tokenizer.decode(ids), text, JSON.stringify(text));
  }
  m.free();
});

test("greedy under its generation_config, it answers dictionary questions in sentences, and stops", () => {
  const model = loadModel(rt, defaultModelDir(), { progress: false });
  // What `serve` does with temperature 0: generation_config.json's repetition_penalty applies.
  const params = resolveSamplingParams({ temperature: 0, maxTokens: 64 }, model.config.vocabSize, samplingDefaults(model.generation));
  const ask = (q: string) => generate({ runner: model.runner, tokenizer: model.tokenizer, eosTokenIds: model.eosTokenIds, promptIds: model.tokenizer.encodeChat([{ role: "user", content: q }]), params });
  for (const [q, word] of [["What is a river?", /river/i], ["What is a dog?", /dog/i], ["Hello", /word/i], ["Thank you", /welcome/i]] as const) {
    const r = ask(q);
    assert.equal(r.finishReason, "stop", `${q} → ${r.text}`);
    assert.match(r.text, word, `${q} → ${r.text}`);
    assert.match(r.text.trim(), /^[A-Z].*[.!?"]$/s, `${q} → a sentence, got ${JSON.stringify(r.text)}`);
  }
  model.runner.dispose();
});

// Issue #29: the model is a memorizer of the chosen vocabulary (tools/train-default-model/vocab.jsonl).
// Each question form a user types is answered from WordNet for a taught word; a word outside
// the vocabulary gets the one trained refusal, which never repeats (and so never misspells) the
// word; the greeting suggests a word the model knows. The defects of the 298-word candidate
// (tools/train-default-model/README.md) and of the #15 model: both fail this test.
interface Taught {
  word: string;
  senses: { pos: string; definition: string; synonyms: string[]; similar?: string[]; antonyms: string[]; examples: string[] }[];
}
const RECIPE = join(defaultModelDir(), "..", "..", "tools", "train-default-model");
const taught = new Map(
  readFileSync(join(RECIPE, "vocab.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as Taught).map((t) => [t.word, t]),
);

test("#29: a taught word is answered from WordNet in every question form, an untaught one by the word-free refusal, and the greeting suggests a taught word", () => {
  const model = loadModel(rt, defaultModelDir(), { progress: false });
  const params = resolveSamplingParams({ temperature: 0, maxTokens: 80 }, model.config.vocabSize, samplingDefaults(model.generation));
  const ask = (q: string) => {
    const r = generate({ runner: model.runner, tokenizer: model.tokenizer, eosTokenIds: model.eosTokenIds, promptIds: model.tokenizer.encodeChat([{ role: "user", content: q }]), params });
    assert.equal(r.finishReason, "stop", `${q} → ${r.text}`);
    return r.text.trim();
  };
  const sense = (w: string) => taught.get(w)!.senses[0]!;
  for (const w of ["river", "dog", "water", "happy"]) assert.ok(taught.has(w), `${w} is in vocab.jsonl`);
  // Definitions, word for word, in the forms a user types.
  for (const [q, w] of [["What is a river?", "river"], ["What does water mean?", "water"], ["Define dog.", "dog"], ["What is the meaning of happy?", "happy"], ["What is a dog?", "dog"]] as const) {
    const a = ask(q);
    assert.ok(a.includes(sense(w).definition), `${q} → ${a}; expected WordNet's gloss "${sense(w).definition}"`);
  }
  const happy = sense("happy");
  const nearHappy = [...happy.synonyms, ...(happy.similar ?? [])];
  const syn = ask("What is another word for happy?");
  assert.ok(nearHappy.length > 0 && nearHappy.some((s) => syn.includes(s)), `another word for happy → ${syn}; expected one of ${nearHappy.join(", ")}`);
  assert.match(ask("What is the opposite of cold?"), new RegExp(`\\b${sense("cold").antonyms[0]}\\b`));
  // The refusal: the same words for any untaught word, asked in any form, never the word itself.
  for (const [q, w] of [["What does brisk mean?", "brisk"], ["What is a zymogen?", "zymogen"], ["Use quixotic in a sentence.", "quixotic"]] as const) {
    assert.ok(!taught.has(w));
    const a = ask(q);
    assert.match(a, /^I don't know that word\./, `${q} → ${a}`);
    assert.doesNotMatch(a.toLowerCase(), new RegExp(w.slice(0, 4)), `${q} → ${a}: a refusal never repeats the word`);
  }
  const hello = ask("Hello");
  const suggested = /(?:What does (\w+) mean\?|What is an? (\w+)\?)/.exec(hello);
  assert.ok(suggested, `Hello → ${hello}: suggests a question`);
  assert.ok(taught.has((suggested[1] ?? suggested[2])!), `Hello → ${hello}: suggests a taught word`);
  model.runner.dispose();
});

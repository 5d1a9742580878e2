// `kvflash serve --speculative-config` end to end with the official openai
// client, on the embedded default model (trained weights: its drafts are
// really accepted in part): greedy and seeded-sampled answers, streamed and
// not, with logprobs, equal a plain server's; /metrics carries vLLM's
// spec_decode counters with per-position acceptance, and the stats log vLLM's
// SpecDecoding line; a bad config stops serve
// with an error naming the field. With a draft model (the default model
// drafting for itself: `{"model": DIR}`) the answers equal a plain server's
// too, and a draft with another tokenizer stops serve naming both models.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServer } from "./harness.js";
import { defaultModelDir } from "../../src/index.js";
import { llama2TokenizerDir, writeTinyModel } from "../../src/testing/index.js";

const MODEL = "kvflash-default";
const SPEC = '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}';
const CLI = fileURLToPath(new URL("../../src/cli/main.js", import.meta.url));
type Create = Parameters<import("openai").OpenAI["chat"]["completions"]["create"]>[0];

test("serve --speculative-config: answers equal a plain server's, streamed or not; spec_decode metrics count drafts", { timeout: 240_000 }, async () => {
  const [spec, plain] = await Promise.all([startServer(["--speculative-config", SPEC], { env: { KVFLASH_LOG_STATS_INTERVAL: "0.5" } }), startServer([])]);
  try {
    assert.match(spec.stderr(), /speculative decoding: ngram, up to 4 drafts, lookup 2\.\.4 tokens, off at 8\+ running/);
    // Answers that repeat themselves or their question, so prompt lookup has something to find.
    const questions = ["What is a river? A river is a river in the southeast of the Brazil. What is a river?", "Hello Hello Hello", "What does brisk mean?", "Hello"];
    const ask = async (server: typeof spec, content: string, extra: Partial<Create>) => {
      const body = { model: MODEL, messages: [{ role: "user" as const, content }], max_tokens: 48, temperature: 0, logprobs: true, top_logprobs: 2, ...extra };
      const r = await server.openai.chat.completions.create({ ...body, stream: false } as Create & { stream: false });
      const c = r.choices[0]!;
      return { text: c.message.content, finish: c.finish_reason, tokens: r.usage!.completion_tokens, logprobs: c.logprobs?.content?.map((l) => [l.token, l.logprob, l.top_logprobs.map((t) => t.token)]) };
    };
    for (const q of questions) {
      for (const extra of [{}, { temperature: 0.8, seed: 11 }, { stop: ["river"] }] as Partial<Create>[]) {
        const [a, b] = await Promise.all([ask(spec, q, extra), ask(plain, q, extra)]);
        assert.deepEqual(a, b, `${q} ${JSON.stringify(extra)}`);
      }
    }
    // Streamed, several at once (batched verification).
    const stream = async (server: typeof spec, content: string) => {
      const s = await server.openai.chat.completions.create({ model: MODEL, messages: [{ role: "user", content }], max_tokens: 40, temperature: 0, stream: true });
      let text = "";
      for await (const chunk of s) text += chunk.choices[0]?.delta?.content ?? "";
      return text;
    };
    const got = await Promise.all(questions.map((q) => stream(spec, q)));
    const want = await Promise.all(questions.map((q) => stream(plain, q)));
    assert.deepEqual(got, want);

    const m = await spec.metrics();
    const l = `model_name="${MODEL}"`;
    const drafts = m.get(`vllm:spec_decode_num_draft_tokens_total{${l}}`)!;
    const accepted = m.get(`vllm:spec_decode_num_accepted_tokens_total{${l}}`)!;
    assert.ok(m.get(`vllm:spec_decode_num_drafts_total{${l}}`)! > 0 && drafts > 0, "drafts were verified");
    assert.ok(accepted > 0 && accepted < drafts, `accepted ${accepted} of ${drafts} drafts`);
    const perPos = [0, 1, 2, 3].map((i) => m.get(`vllm:spec_decode_num_accepted_tokens_per_pos_total{${l},position="${i}"}`)!);
    assert.equal(perPos.reduce((a, b) => a + b, 0), accepted);
    assert.ok(perPos.every((n, i) => i === 0 || n <= perPos[i - 1]!), `a later position is accepted only after the earlier ones: ${perPos}`);
    assert.equal(m.get(`vllm:num_requests_running{${l}}`), 0);
    assert.equal([...(await plain.metrics()).keys()].some((k) => k.includes("spec_decode")), false, "no spec_decode counters without speculation");
    for (let i = 0; i < 100 && !/SpecDecoding metrics: Mean acceptance length: \d/.test(spec.stderr()); i++) await new Promise((r) => setTimeout(r, 50));
    assert.match(spec.stderr(), /SpecDecoding metrics: Mean acceptance length: [\d.]+, .* Per-position acceptance rate: [\d.]+, [\d.]+, [\d.]+, [\d.]+, Avg Draft acceptance rate: [\d.]+%/);
  } finally {
    await Promise.all([spec.stop(), plain.stop()]);
  }
});

test("serve with a bad --speculative-config exits 1 naming the field and the value", () => {
  const r = spawnSync(process.execPath, [CLI, "serve", "--port", "0", "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 0}'], { encoding: "utf8", timeout: 30_000 });
  assert.match(r.stderr, /--speculative-config\.prompt_lookup_min must be ≥ 1, got 0/);
  assert.equal(r.status, 1);
});

test("serve --speculative-config with a draft model: greedy and seeded answers equal a plain server's; drafts are counted", { timeout: 240_000 }, async () => {
  const draft = JSON.stringify({ model: defaultModelDir(), num_speculative_tokens: 3 });
  const [spec, plain] = await Promise.all([startServer(["--speculative-config", draft]), startServer([])]);
  try {
    for (let i = 0; i < 100 && !/ready in/.test(spec.stderr()); i++) await new Promise((r) => setTimeout(r, 50));
    assert.match(spec.stderr(), /speculative decoding: draft model .*models\/default, up to 3 drafts, off at 8\+ running/);
    const ask = async (server: typeof spec, content: string, extra: Partial<Create>) => {
      const body = { model: MODEL, messages: [{ role: "user" as const, content }], max_tokens: 32, temperature: 0, logprobs: true, ...extra };
      const r = await server.openai.chat.completions.create({ ...body, stream: false } as Create & { stream: false });
      const c = r.choices[0]!;
      return { text: c.message.content, finish: c.finish_reason, logprobs: c.logprobs?.content?.map((l) => [l.token, l.logprob]) };
    };
    const questions = ["What does brisk mean?", "Hello", "What is a river?"];
    for (const extra of [{}, { temperature: 0.8, seed: 5 }, { frequency_penalty: 0 }] as Partial<Create>[]) {
      const got = await Promise.all(questions.map((q) => ask(spec, q, extra))); // batched verification
      const want = await Promise.all(questions.map((q) => ask(plain, q, extra)));
      assert.deepEqual(got, want, JSON.stringify(extra));
    }
    const m = await spec.metrics();
    const l = `model_name="${MODEL}"`;
    const drafts = m.get(`vllm:spec_decode_num_draft_tokens_total{${l}}`)!;
    const accepted = m.get(`vllm:spec_decode_num_accepted_tokens_total{${l}}`)!;
    assert.ok(drafts > 0 && accepted > 0.3 * drafts, `accepted ${accepted} of ${drafts} drafts`);
  } finally {
    await Promise.all([spec.stop(), plain.stop()]);
  }
});

test("serve with a draft model's sampled drafts (draft_sampling \"sampled\"): the ready line says so; seeded answers reproduce at temperature 1, drafts are kept; json_schema answers all parse", { timeout: 240_000 }, async () => {
  const draft = JSON.stringify({ model: defaultModelDir(), num_speculative_tokens: 3, draft_sampling: "sampled" });
  const spec = await startServer(["--speculative-config", draft]);
  try {
    for (let i = 0; i < 100 && !/ready in/.test(spec.stderr()); i++) await new Promise((r) => setTimeout(r, 50));
    assert.match(spec.stderr(), /speculative decoding: draft model .*models\/default, up to 3 drafts, sampled for sampling requests \(draft_sampling sampled\), off at 8\+ running/);
    const ask = async (content: string) => {
      const body = { model: MODEL, messages: [{ role: "user" as const, content }], max_tokens: 32, temperature: 1, top_p: 0.9, seed: 7, logprobs: true };
      const r = await spec.openai.chat.completions.create({ ...body, stream: false } as Create & { stream: false });
      const c = r.choices[0]!;
      return { text: c.message.content, logprobs: c.logprobs?.content?.map((l) => [l.token, l.logprob]) };
    };
    const questions = ["What does brisk mean?", "Hello", "What is a river?"];
    const first = await Promise.all(questions.map((q) => ask(q)));
    const again = await Promise.all(questions.map((q) => ask(q)));
    assert.deepEqual(again.map((x) => x.text), first.map((x) => x.text));
    assert.ok(first.every((x) => (x.text ?? "").length > 0 && (x.logprobs ?? []).length > 0));
    const m = await spec.metrics();
    const l = `model_name="${MODEL}"`;
    const drafts = m.get(`vllm:spec_decode_num_draft_tokens_total{${l}}`)!;
    const accepted = m.get(`vllm:spec_decode_num_accepted_tokens_total{${l}}`)!;
    assert.ok(drafts > 0 && accepted > 0.9 * drafts, `a model drafting for itself with sampled drafts: accepted ${accepted} of ${drafts}`);
    // Structured output with sampled drafts (drafted under the grammar's masks): every seed's answer is valid.
    const schema = { type: "object", properties: { word: { type: "string", pattern: "^[a-z]{2,10}$" }, count: { type: "integer", minimum: 0, maximum: 99 } }, required: ["word", "count"], additionalProperties: false };
    const answers = await Promise.all(
      [1, 2, 3, 4, 5, 6].map(async (seed) => {
        const body = { model: MODEL, messages: [{ role: "user" as const, content: "What is a river?" }], max_tokens: 64, temperature: 1, seed, response_format: { type: "json_schema" as const, json_schema: { name: "w", schema, strict: true } } };
        const r = await spec.openai.chat.completions.create({ ...body, stream: false } as Create & { stream: false });
        return { text: r.choices[0]!.message.content ?? "", finish: r.choices[0]!.finish_reason };
      }),
    );
    for (const a of answers) {
      assert.equal(a.finish, "stop", a.text);
      const v = JSON.parse(a.text) as { word: string; count: number };
      assert.ok(/^[a-z]{2,10}$/.test(v.word) && Number.isInteger(v.count) && v.count >= 0 && v.count <= 99, a.text);
    }
    const after = (await spec.metrics()).get(`vllm:spec_decode_num_draft_tokens_total{${l}}`)!;
    assert.ok(after > drafts, "the structured requests were drafted for");
  } finally {
    await spec.stop();
  }
});

test("serve with a draft model whose tokenizer differs exits 1 naming both models", () => {
  const root = mkdtempSync(join(tmpdir(), "kvflash-draft-"));
  try {
    const other = writeTinyModel(join(root, "llama"), { arch: "llama", seed: 3, tokenizer: { kind: "copy", dir: llama2TokenizerDir() } }).dir;
    const r = spawnSync(process.execPath, [CLI, "serve", "--port", "0", "--threads", "1", "--speculative-config", JSON.stringify({ model: other, num_speculative_tokens: 2 })], { encoding: "utf8", timeout: 60_000 });
    assert.match(r.stderr, /the draft model .*llama must share the target model .*models\/default's tokenizer: its vocabulary has 32000 tokens, the target's 4096/);
    assert.equal(r.status, 1);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

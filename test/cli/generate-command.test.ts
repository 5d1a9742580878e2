// The real `kvflash generate` and `kvflash logits` processes on a tiny model
// directory, against the library in this process: the same tokens, text,
// logprobs and logits; streaming to stdout, speed to stderr; clear errors.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { after, before, test } from "node:test";
import {
  type LoadedModel,
  type Runtime,
  createRuntime,
  generate,
  loadModel,
  promptLogits,
  resolveSamplingParams,
  samplingDefaults,
} from "../../src/ops-entry.js";
import { llama2TokenizerDir, writeTinyModel } from "../../src/testing/index.js";

const MAIN = fileURLToPath(new URL("../../src/cli/main.js", import.meta.url));
const run = promisify(execFile);

interface Output {
  code: number;
  stdout: string;
  stderr: string;
}

async function kvflash(...args: string[]): Promise<Output> {
  try {
    const { stdout, stderr } = await run(process.execPath, [MAIN, ...args], { env: { ...process.env, KVFLASH_THREADS: "2" } });
    return { code: 0, stdout, stderr };
  } catch (e) {
    const err = e as { code?: number; stdout?: string; stderr?: string };
    return { code: err.code ?? -1, stdout: err.stdout ?? "", stderr: err.stderr ?? "" };
  }
}

let rt: Runtime;
let root: string;
let dir: string;
let model: LoadedModel;

before(async () => {
  rt = await createRuntime({ threads: 2 });
  root = mkdtempSync(join(tmpdir(), "kvflash-cli-"));
  dir = writeTinyModel(join(root, "qwen2"), { arch: "qwen2", seed: 9, embeddingStd: 0.05, generation: { temperature: 0.7, top_p: 0.9 } }).dir;
  model = loadModel(rt, dir, { progress: false });
});
after(async () => {
  model.runner.dispose();
  rmSync(root, { recursive: true, force: true });
  await rt.dispose();
});

test("generate --json: the library's ids, text and logprobs; --temperature 0 is greedy", async () => {
  const out = await kvflash("generate", "--model", dir, "--prompt", "Hello there", "--max-tokens", "10", "--temperature", "0", "--ignore-eos", "--json");
  assert.equal(out.code, 0, out.stderr);
  const json = JSON.parse(out.stdout) as { ids: number[]; text: string; logprobs: number[]; finish_reason: string };
  const params = resolveSamplingParams({ temperature: 0, maxTokens: 10, ignoreEos: true, logprobs: 0 }, model.config.vocabSize, samplingDefaults(model.generation));
  const want = generate({ runner: model.runner, tokenizer: model.tokenizer, promptIds: model.tokenizer.encode("Hello there"), params, eosTokenIds: model.eosTokenIds, runtime: rt }); // as the CLI runs it: the wasm passes
  assert.deepEqual(json.ids, want.ids);
  assert.equal(json.text, want.text);
  assert.deepEqual(json.logprobs, want.logprobs);
  assert.equal(json.finish_reason, "length");
  assert.match(out.stderr, /prefill: \d+ tokens in [\d.]+ ms \([\d.]+ tok\/s\) · decode: 9 tokens in [\d.]+ ms \([\d.]+ tok\/s\)/);
});

test("generate streams the same text to stdout; --seed reproduces across processes; --stop cuts the text", async () => {
  const args = ["generate", "--model", dir, "--prompt", "Once upon a time", "--chat", "--max-tokens", "12", "--seed", "7", "--ignore-eos"];
  const a = await kvflash(...args);
  const b = await kvflash(...args);
  const j = await kvflash(...args, "--json");
  assert.equal(a.code, 0, a.stderr);
  assert.equal(a.stdout, b.stdout);
  const text = (JSON.parse(j.stdout) as { text: string }).text;
  assert.equal(a.stdout, `${text}\n`);
  // The same request in the library, with the model's generation_config defaults (temperature 0.7, top_p 0.9).
  const params = resolveSamplingParams({ maxTokens: 12, seed: 7, ignoreEos: true }, model.config.vocabSize, samplingDefaults(model.generation));
  const promptIds = model.tokenizer.encodeChat([{ role: "user", content: "Once upon a time" }]);
  assert.equal(generate({ runner: model.runner, tokenizer: model.tokenizer, promptIds, params, runtime: rt }).text, text);
  const stop = text.slice(2, 5);
  const cut = await kvflash(...args, "--stop", stop, "--json");
  const cj = JSON.parse(cut.stdout) as { text: string; finish_reason: string };
  assert.equal(cj.text, text.slice(0, text.indexOf(stop)));
  assert.equal(cj.finish_reason, "stop");
});

test("generate --speculative-config with a draft model: the same ids as without; the acceptance on stderr; a draft with another tokenizer is refused naming both", async () => {
  const args = ["generate", "--model", dir, "--prompt", "Once upon a time", "--max-tokens", "24", "--ignore-eos", "--temperature", "0", "--json"];
  const [plain, spec] = await Promise.all([kvflash(...args), kvflash(...args, "--speculative-config", JSON.stringify({ model: dir, num_speculative_tokens: 3 }))]);
  assert.equal(spec.code, 0, spec.stderr);
  assert.deepEqual(JSON.parse(spec.stdout), JSON.parse(plain.stdout));
  assert.match(spec.stderr, /draft model .*qwen2: Qwen2ForCausalLM, weights f32, 2 layers, KV \d+ blocks × \d+; up to 3 drafts a step/);
  const m = /speculative: (\d+) of (\d+) drafts accepted/.exec(spec.stderr);
  assert.ok(m !== null && Number(m[2]) > 0 && Number(m[1]) === Number(m[2]), `the model drafting for itself has every draft accepted: ${spec.stderr}`);
  const other = writeTinyModel(join(root, "llama"), { arch: "llama", seed: 3, tokenizer: { kind: "copy", dir: llama2TokenizerDir() } }).dir;
  const bad = await kvflash(...args, "--speculative-config", JSON.stringify({ model: other, num_speculative_tokens: 3 }));
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /speculativeConfig\.model the draft model .*llama must share the target model .*qwen2's tokenizer: its vocabulary has 32000 tokens/);
});

test("logits --json prints the last position's logits, bit for bit the library's", async () => {
  const out = await kvflash("logits", "--model", dir, "--ids", "1,2,3,40", "--json", "--weights", "q8", "--kv-dtype", "int8");
  assert.equal(out.code, 0, out.stderr);
  const json = JSON.parse(out.stdout) as { ids: number[]; logits: number[] };
  assert.deepEqual(json.ids, [1, 2, 3, 40]);
  const q8 = loadModel(rt, dir, { weights: "q8", kvDtype: "int8", progress: false });
  const want = promptLogits(q8.runner, [1, 2, 3, 40]);
  q8.runner.dispose();
  assert.deepEqual(Float32Array.from(json.logits), want);
  const top = await kvflash("logits", "--model", dir, "--prompt", "hi", "--top", "3");
  assert.equal(top.stdout.trim().split("\n").length, 3);
});

test("without --model the embedded default model runs", async () => {
  const out = await kvflash("generate", "--prompt", "Hi", "--max-tokens", "3");
  assert.equal(out.code, 0, out.stderr);
  assert.match(out.stderr, /models[/\\]default: LlamaForCausalLM/);
  // One sequence's KV cache (max_position_embeddings 1024 / 16 blocks), and where the model lives, in the startup line.
  assert.match(out.stderr, /KV bf16 64 blocks × 16, .*; memory 0: embedding, layers 0–3, head, \d/);
});

test("bad arguments exit 1 with a message naming the flag and the value", async () => {
  const cases: [string[], RegExp][] = [
    [["generate", "--model", dir], /--prompt is required/],
    [["generate", "--prompt", "x", "--max-tokens", "0"], /--max-tokens must be an integer ≥ 1, got "0"/],
    [["generate", "--prompt", "x", "--temperatur", "1"], /--temperatur is not an option of this command/],
    [["generate", "--model", dir, "--prompt", "x", "--weights", "q3"], /weights must be one of .* got "q3"/],
    [["generate", "--model", dir, "--prompt", "x", "--top-p", "1.5"], /--top-p must be ≤ 1, got 1\.5/],
    // Checked before the model loads: the missing directory is never reached.
    [["generate", "--model", join(root, "nowhere"), "--prompt", "x", "--temperature", "-1"], /--temperature must be ≥ 0, got -1/],
    [["logits", "--model", dir, "--ids", "1,x"], /--ids\[1\] must be a token id/],
    [["logits", "--model", dir, "--ids", "1", "--prompt", "y"], /--ids or --prompt is required \(one of them\)/],
    [["generate", "--model", join(root, "nowhere"), "--prompt", "x"], /--model ".*nowhere": no such file or directory/],
    [["generate", "--prompt", "x", "--kv-cache-gib", "0.00000001"], /--kv-cache-gib must hold at least one KV block of [\d.]+ KiB .*got 10 B/],
    // maxModelLen is resolved against the model's config (its max_position_embeddings), naming the flag and the value.
    [["generate", "--model", dir, "--prompt", "x", "--max-model-len", "999999"], /--max-model-len must be ≤ \d+, what the model allows \(max_position_embeddings \d+ in config\.json\), got 999999/],
    [["generate", "--prompt", "x", "--speculative-config", '{"model": "d", "num_speculative_tokens": 0}'], /--speculative-config\.num_speculative_tokens must be ≥ 1, got 0/],
    [["logits", "--ids", "1", "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2}'], /--speculative-config is a generation setting: logits runs no decoding steps/],
  ];
  for (const [args, message] of cases) {
    const out = await kvflash(...args);
    assert.equal(out.code, 1, args.join(" "));
    assert.match(out.stderr, message, args.join(" "));
  }
  const help = await kvflash("generate", "--help");
  assert.equal(help.code, 0);
  assert.match(help.stdout, /--repetition-penalty/);
});

test("--device webgpu without a WebGPU adapter fails with what to install; --device auto then runs on the CPU", async () => {
  // A Vulkan loader pointed at no driver (or no "webgpu" package at all): either way, a clear error and exit 1.
  const env = { ...process.env, KVFLASH_THREADS: "1", VK_ICD_FILENAMES: join(tmpdir(), "kvflash-no-such-icd.json") };
  const exec = async (...args: string[]): Promise<Output> => {
    try {
      const { stdout, stderr } = await run(process.execPath, [MAIN, ...args], { env });
      return { code: 0, stdout, stderr };
    } catch (e) {
      const err = e as { code?: number; stdout?: string; stderr?: string };
      return { code: err.code ?? -1, stdout: err.stdout ?? "", stderr: err.stderr ?? "" };
    }
  };
  const gpu = await exec("generate", "--model", dir, "--prompt", "hi", "--max-tokens", "2", "--device", "webgpu");
  assert.equal(gpu.code, 1, gpu.stderr);
  assert.match(gpu.stderr, /--device webgpu (found no WebGPU adapter\. .*VK_ICD_FILENAMES|needs the optional package "webgpu".*npm install webgpu)/);
  const auto = await exec("generate", "--model", dir, "--prompt", "hi", "--max-tokens", "2", "--device", "auto", "--temperature", "0");
  assert.equal(auto.code, 0, auto.stderr);
  assert.match(auto.stderr, /--device auto: no hardware WebGPU adapter, running on the CPU/);
});

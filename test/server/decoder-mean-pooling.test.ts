// Mean pooling for a decoder served as an embedding model, as vLLM's pooling
// runner does with `--task embed --pooler-config '{"pooling_type": "MEAN"}'`:
// `kvflash serve` on a plain tiny LlamaForCausalLM, called with the official
// openai client's embeddings.create; each vector = the f64 mean of the float64
// reference decoder's final-normed hidden states (referenceForward, output
// "hidden") over the prompt's tokens, L2-normalized, within 1e-5. Also: the
// flag's parsing (vLLM's keys, the older --override-pooler-config spelling,
// errors naming the key) and serve() refusing a pooler config where it does
// not apply (an encoder, task generate).
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { parseServeArgs } from "../../src/cli/serve-args.js";
import { ArgumentError } from "../../src/errors.js";
import { type Runtime, createRuntime } from "../../src/ops-entry.js";
import { type ReferenceWeights, referenceForward, writeTinyModel } from "../../src/testing/index.js";
import type { ModelConfig } from "../../src/model/config.js";
import { writeTinyBert } from "../../src/testing/tiny-bert.js";
import { serve } from "../../src/server/start-server.js";
import { Tokenizer } from "../../src/tokenizer/tokenizer.js";
import { referenceWeights } from "../model/decoder-support.js";
import { type ServerProcess, startServer } from "./harness.js";

const NAME = "llama-mean";
let root: string;
let dir: string;
let server: ServerProcess;
let config: ModelConfig;
let weights: ReferenceWeights;
let tok: Tokenizer;

before(async () => {
  root = mkdtempSync(join(tmpdir(), "kvflash-dec-mean-"));
  const m = writeTinyModel(join(root, "llama-tiny"), { arch: "llama", seed: 14, numLayers: 2, hiddenSize: 32, intermediateSize: 64 });
  dir = m.dir;
  config = m.config;
  tok = Tokenizer.fromDir(dir);
  const rt: Runtime = await createRuntime({ threads: 1 });
  try {
    weights = referenceWeights(rt, dir);
  } finally {
    await rt.dispose();
  }
  server = await startServer(["--model", dir, "--served-model-name", NAME, "--task", "embed", "--pooler-config", '{"pooling_type": "MEAN"}']);
});
after(async () => {
  await server?.stop();
  rmSync(root, { recursive: true, force: true });
});

/** The reference: the mean over the prompt's tokens of the final-normed hidden states (f64), L2-normalized. */
function reference(text: string): number[] {
  const ids = tok.encode(text);
  const h = config.hiddenSize;
  const hidden = referenceForward(config, weights, ids, { output: "hidden" });
  const v = Array.from({ length: h }, (_, i) => ids.reduce((s, _id, t) => s + hidden[t * h + i]!, 0) / ids.length);
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
}

test("--task embed --pooler-config MEAN: embeddings.create = the mean of the float64 reference's final-normed states, normalized, to 1e-5", async () => {
  const texts = ["The giant panda is a bear.", "a", "hello hello hello world"];
  const r = await server.openai.embeddings.create({ model: NAME, input: texts, encoding_format: "float" });
  const tokens = texts.reduce((n, t) => n + tok.encode(t).length, 0);
  assert.deepEqual(r.usage, { prompt_tokens: tokens, total_tokens: tokens });
  texts.forEach((t, i) => {
    const want = reference(t);
    const got = r.data[i]!.embedding;
    assert.equal(got.length, config.hiddenSize);
    const err = Math.max(...want.map((v, j) => Math.abs(v - got[j]!)));
    assert.ok(err <= 1e-5, `${JSON.stringify(t)}: max error ${err}`);
  });
  // The mean is not the last token: the two differ on a multi-token prompt.
  const ids = tok.encode(texts[0]!);
  const h = config.hiddenSize;
  const last = Array.from(referenceForward(config, weights, ids, { output: "hidden" }).subarray((ids.length - 1) * h, ids.length * h));
  const n = Math.hypot(...last);
  assert.ok(Math.max(...last.map((v, j) => Math.abs(v / n - r.data[0]!.embedding[j]!))) > 1e-3);
});

test("--pooler-config parsing: vLLM's keys, --override-pooler-config, bad values named", () => {
  assert.deepEqual(parseServeArgs(["--task", "embed", "--pooler-config", '{"pooling_type": "mean", "normalize": false}'], {}).poolerConfig, { poolingType: "mean", normalize: false });
  assert.deepEqual(parseServeArgs(["--override-pooler-config={\"pooling_type\": \"CLS\"}"], {}).poolerConfig, { poolingType: "cls" });
  const named = (re: RegExp) => (e: unknown) => e instanceof ArgumentError && re.test(`${e.argument} ${e.message}`);
  assert.throws(() => parseServeArgs(["--pooler-config", '{"pooling_type": "MAX"}'], {}), named(/^--pooler-config pooling_type .*"MAX"/));
  assert.throws(() => parseServeArgs(["--pooler-config", '{"dimensions": 8}'], {}), named(/^--pooler-config dimensions /));
  assert.throws(() => parseServeArgs(["--pooler-config", '{"normalize": "yes"}'], {}), named(/^--pooler-config normalize /));
  assert.throws(() => parseServeArgs(["--pooler-config", "MEAN"], {}), named(/^--pooler-config .*must be a JSON object/));
});

test("serve() refuses a pooler config where it does not apply: an encoder, task generate", async () => {
  const bert = join(root, "bert");
  writeTinyBert({ dir: bert, numLayers: 1 });
  const refused = (e: unknown) => e instanceof ArgumentError && e.argument === "poolerConfig";
  await assert.rejects(serve({ modelDir: bert, port: 0, threads: 1, poolerConfig: { poolingType: "mean" } }), refused);
  await assert.rejects(serve({ modelDir: dir, port: 0, threads: 1, task: "generate", poolerConfig: { poolingType: "mean" } }), refused);
  await assert.rejects(serve({ modelDir: dir, port: 0, threads: 1, task: "embed", poolerConfig: { poolingType: "max" as "mean" } }), (e: unknown) => e instanceof ArgumentError && e.argument === "poolerConfig.poolingType");
});

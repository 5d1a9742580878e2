// `--model sentence-transformers/all-MiniLM-L6-v2` from a hub (a mock hub on
// 127.0.0.1 holding a tiny random-weight repo of that layout): the pull
// fetches sentence-transformers' modules.json, sentence_bert_config.json and
// 1_Pooling/config.json beside the weights (without them the model would pool
// with the CLS default instead of its mean pooling), skips the ONNX and
// PyTorch twins, and the served vectors equal the float64 reference of the
// repo's mean pooling.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import OpenAI from "openai";
import { hubSettings } from "../../src/sources/hub/hub-settings.js";
import { encoderTokenizer } from "../../src/model/encoder/encoder-model.js";
import { resolveModelSource } from "../../src/sources/source.js";
import { serve } from "../../src/server/start-server.js";
import { writeTinyBert } from "../../src/testing/tiny-bert.js";
import { MockHub, readTree } from "../helpers/mock-hub.js";
import { referenceEmbedding } from "../model/encoder/bert-reference.js";

const REPO = "sentence-transformers/all-MiniLM-L6-v2";
let root: string;
let dir: string;
let hub: MockHub;

before(async () => {
  root = mkdtempSync(join(tmpdir(), "kvflash-embed-hub-"));
  dir = join(root, "repo");
  writeTinyBert({ dir, seed: 8, hiddenSize: 32, numHeads: 4, numLayers: 2, maxPositionEmbeddings: 32, pooling: "mean", words: ["hello", "world"] });
  writeFileSync(join(dir, "pytorch_model.bin"), "not fetched");
  const files = readTree(dir);
  files.set("onnx/model.onnx", Buffer.from("not fetched"));
  hub = await MockHub.start();
  hub.addCommit(REPO, files);
});
after(async () => {
  await hub.close();
  rmSync(root, { recursive: true, force: true });
});

test("serve --model sentence-transformers/all-MiniLM-L6-v2 from the hub: pooling files fetched, vectors = the reference's mean pooling", async () => {
  const settings = hubSettings({ HF_HOME: join(root, "home"), HF_HUB_CACHE: join(root, "cache"), HF_ENDPOINT: hub.url });
  const resolved = await resolveModelSource(REPO, { settings, progress: false });
  assert.equal(resolved.from, "hub");
  const fetched = [...new Set(hub.requests.flatMap((r) => /\/resolve\/[^/]+\/(.+)$/.exec(r.path)?.[1] ?? []))];
  for (const f of ["modules.json", "1_Pooling/config.json", "sentence_bert_config.json", "model.safetensors"]) assert.ok(fetched.includes(f), `${f} fetched (${fetched.join(", ")})`);
  assert.ok(!fetched.some((f) => f === "pytorch_model.bin" || f?.startsWith("onnx/")), fetched.join(", "));
  const running = await serve({ source: resolved.source, port: 0, servedModelNames: [REPO], threads: 1 });
  try {
    await running.ready;
    const openai = new OpenAI({ baseURL: `${running.url}/v1`, apiKey: "unused", maxRetries: 0 });
    const r = await openai.embeddings.create({ model: REPO, input: "hello world" });
    const ref = referenceEmbedding(dir, { hidden: 32, heads: 4, layers: 2, eps: 1e-12, gelu: "erf" }, encoderTokenizer(dir).encode("hello world"), "mean", true);
    const err = Math.max(...ref.map((v, i) => Math.abs(v - r.data[0]!.embedding[i]!)));
    assert.ok(err <= 1e-5, `max error ${err}`);
  } finally {
    await running.close();
  }
});

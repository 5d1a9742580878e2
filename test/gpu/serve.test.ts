// `kvflash serve --device webgpu` end to end, on SwiftShader in CI: a real
// server process whose engine runs the WebGPU ModelRunner, called with the
// official openai client — streaming chat (its deltas make the greedy text of
// the same server on --device cpu), n = 2 samples of one prompt, structured
// output (a JSON schema) — and the startup line naming the adapter. The model
// is tiny (hidden 64, a 448-token vocabulary): SwiftShader runs every
// workgroup on the CPU.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { writeTinyModel } from "../../src/testing/index.js";
import { MODEL, type ServerProcess, startServer } from "../server/harness.js";
import { openTestGpu } from "./support.js";

const opened = await openTestGpu();
opened.gpu?.destroy(); // the server opens its own device; this only decides whether the suite runs
// Skipped test by test, not as a suite: a skipped describe declares none of its tests.
const gpuTest = (name: string, fn: () => Promise<void> | void) => test(name, { skip: opened.skip }, fn);

describe("kvflash serve --device webgpu", () => {
  let dir: string;
  let gpu: ServerProcess;
  let cpu: ServerProcess;
  before(async () => {
    if (opened.skip) return;
    dir = mkdtempSync(join(tmpdir(), "kvflash-gpu-serve-"));
    writeTinyModel(dir, { arch: "llama", seed: 5, hiddenSize: 64, intermediateSize: 128, numLayers: 2, numHeads: 4, numKvHeads: 2, tieWordEmbeddings: false, embeddingStd: 0.3, dtype: "bf16" });
    const args = ["--model", dir, "--served-model-name", MODEL, "--num-gpu-blocks-override", "64", "--block-size", "16", "--max-num-seqs", "4"];
    [gpu, cpu] = await Promise.all([startServer([...args, "--device", "webgpu"]), startServer(args)]);
  });
  after(async () => {
    if (opened.skip) return;
    const codes = await Promise.all([gpu?.stop(), cpu?.stop()]);
    rmSync(dir, { recursive: true, force: true });
    assert.deepEqual(codes, [0, 0], `${gpu?.stderr()}\n${cpu?.stderr()}`);
  });

  const messages = [{ role: "user" as const, content: "Say something about the sea." }];

  gpuTest("the startup line names the WebGPU adapter", () => {
    assert.match(gpu.stderr(), /ready in .*webgpu: .+ \(.+\)/, gpu.stderr());
    assert.doesNotMatch(cpu.stderr(), /webgpu:/);
  });

  gpuTest("streaming greedy chat gives the CPU server's text, delta by delta", async () => {
    const want = await cpu.openai.chat.completions.create({ model: MODEL, messages, max_tokens: 8, temperature: 0 });
    const stream = await gpu.openai.chat.completions.create({ model: MODEL, messages, max_tokens: 8, temperature: 0, stream: true });
    let text = "";
    let chunks = 0;
    let finish: string | null = null;
    for await (const chunk of stream) {
      const c = chunk.choices[0];
      if (!c) continue;
      text += c.delta.content ?? "";
      chunks++;
      finish = c.finish_reason ?? finish;
    }
    assert.ok(chunks >= 2, `streamed in ${chunks} chunk(s)`);
    assert.equal(text, want.choices[0]!.message.content);
    assert.equal(finish, want.choices[0]!.finish_reason);
  });

  gpuTest("n = 2 seeded samples: two choices, each as the CPU server samples it", async () => {
    const req = { model: MODEL, messages, max_tokens: 6, temperature: 1, seed: 11, n: 2 };
    const [got, want] = await Promise.all([gpu.openai.chat.completions.create(req), cpu.openai.chat.completions.create(req)]);
    assert.equal(got.choices.length, 2);
    assert.deepEqual(
      got.choices.map((c) => [c.index, c.message.content]),
      want.choices.map((c) => [c.index, c.message.content]),
    );
  });

  gpuTest("a client that leaves mid-stream is aborted between GPU steps; the next request is served", async () => {
    const controller = new AbortController();
    const stream = await gpu.openai.chat.completions.create({ model: MODEL, messages, max_tokens: 200, temperature: 0, stream: true, ignore_eos: true } as never, { signal: controller.signal });
    let chunks = 0;
    try {
      for await (const _ of stream as unknown as AsyncIterable<unknown>) if (++chunks === 3) controller.abort();
    } catch {
      // the client's own abort
    }
    assert.ok(chunks >= 3 && chunks < 20, `the stream stopped after the abort (${chunks} chunks)`);
    const r = await gpu.openai.chat.completions.create({ model: MODEL, messages, max_tokens: 3, temperature: 0 });
    assert.equal(r.choices[0]!.finish_reason, "length");
  });

  gpuTest("structured output: a JSON schema's enum, masked by XGrammar on the GPU runner's logits", async () => {
    const schema = { enum: ["calm", "stormy"] };
    const r = await gpu.openai.chat.completions.create({
      model: MODEL,
      messages,
      max_tokens: 16,
      temperature: 0,
      response_format: { type: "json_schema", json_schema: { name: "sea", schema, strict: true } },
    });
    const choice = r.choices[0]!;
    assert.equal(choice.finish_reason, "stop", choice.message.content ?? "");
    assert.ok(["calm", "stormy"].includes(JSON.parse(choice.message.content!) as string), choice.message.content ?? "");
  });
});

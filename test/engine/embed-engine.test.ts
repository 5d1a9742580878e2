// EmbedEngine (engine/embed-engine.ts), the step loop of an embedding model,
// on a tiny random BERT: whole sequences first come first served within the
// token budget and max_num_seqs (exact batch contents checked), an over-budget
// sequence alone, a forward that throws failing only its step's requests,
// the waiting-queue cap, abort, bad sequences refused at add, and the metrics.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { EmbedEngine } from "../../src/engine/embed-engine.js";
import { ArgumentError } from "../../src/errors.js";
import { EncoderModel, loadEncoderModel } from "../../src/model/encoder/encoder-model.js";
import type { EncoderBatch } from "../../src/model/encoder/bert-encoder.js";
import { type Runtime, createRuntime } from "../../src/runtime/runtime.js";
import { writeTinyBert } from "../../src/testing/tiny-bert.js";

const POISON = 7;

/** The real model, recording each step's sequences and throwing on any batch holding POISON. */
class Recording extends EncoderModel {
  readonly batches: number[][][] = [];
  override embedBatch(batch: EncoderBatch): Float32Array[] {
    const tokens = Array.from(batch.tokens);
    const cu = Array.from(batch.cuSeqlens);
    this.batches.push(cu.slice(1).map((end, i) => tokens.slice(cu[i]!, end)));
    if (tokens.includes(POISON)) throw new Error("poisoned batch");
    return super.embedBatch(batch);
  }
}

let rt: Runtime;
let root: string;
let model: Recording;

before(async () => {
  rt = await createRuntime({ threads: 2 });
  root = mkdtempSync(join(tmpdir(), "kvflash-embed-engine-"));
  writeTinyBert({ dir: root, numLayers: 1, maxPositionEmbeddings: 40 });
  const real = loadEncoderModel(rt, root);
  model = new Recording(real.info, real.encoder);
});
after(async () => {
  model.dispose();
  await rt.dispose();
  rmSync(root, { recursive: true, force: true });
});

const seq = (n: number, base: number): number[] => Array.from({ length: n }, (_, i) => base + i);
const close = (a: Float32Array, b: Float32Array): boolean => a.every((v, i) => Math.abs(v - b[i]!) <= 1e-6);

test("steps take whole sequences FIFO within the token budget and max_num_seqs; a request answers once all its sequences are pooled", () => {
  const engine = new EmbedEngine({ model, maxNumBatchedTokens: 10, maxNumSeqs: 3, maxWaitingRequests: 10 });
  model.batches.length = 0;
  const a = [seq(4, 10), seq(4, 20), seq(4, 30)];
  const b = [seq(3, 40)];
  const c = [seq(2, 50), seq(2, 52), seq(2, 54)];
  engine.add({ requestId: "a", sequences: a });
  engine.add({ requestId: "b", sequences: b });
  engine.add({ requestId: "c", sequences: c });
  assert.deepEqual(engine.step(), []); // a0 + a1 = 8 tokens; a2 would make 12 > 10
  const second = engine.step(); // a2 + b0 + c0 = 9 tokens, 3 sequences (max_num_seqs): c1 waits
  const third = engine.step();
  assert.deepEqual(model.batches, [[a[0], a[1]], [a[2], b[0], c[0]], [c[1], c[2]]]);
  assert.deepEqual(second.map((o) => o.requestId), ["a", "b"]);
  assert.deepEqual(third.map((o) => o.requestId), ["c"]);
  const alone = model.embed([...a, ...b, ...c]);
  const got = [...second[0]!.embeddings!, ...second[1]!.embeddings!, ...third[0]!.embeddings!];
  got.forEach((v, i) => assert.ok(close(v, alone[i]!), `sequence ${i}`));
  assert.deepEqual(second.map((o) => o.promptTokens), [12, 3]);
  assert.equal(engine.hasUnfinishedRequests, false);
});

test("a sequence longer than the budget runs alone; a throwing forward fails only the requests of its step, and the engine goes on", () => {
  const engine = new EmbedEngine({ model, maxNumBatchedTokens: 10, maxNumSeqs: 8, maxWaitingRequests: 10 });
  model.batches.length = 0;
  engine.add({ requestId: "long", sequences: [seq(25, 60)] });
  engine.add({ requestId: "bad", sequences: [[2, POISON, 3]] });
  engine.add({ requestId: "neighbour", sequences: [[2, 8, 3]] });
  engine.add({ requestId: "later", sequences: [seq(6, 70)] });
  assert.deepEqual(engine.step().map((o) => o.requestId), ["long"]);
  const failed = engine.step();
  assert.deepEqual(failed.map((o) => [o.requestId, o.embeddings, /poisoned batch/.test(o.error ?? "")]), [["bad", null, true], ["neighbour", null, true]]);
  const ok = engine.step();
  assert.deepEqual(ok.map((o) => o.requestId), ["later"]);
  assert.ok(close(ok[0]!.embeddings![0]!, model.embed([seq(6, 70)])[0]!));
  const s = engine.stats();
  assert.deepEqual([s.requestSuccess.stop, s.requestSuccess.error, s.numFailedForwards, s.promptTokens], [2, 2, 1, 31]);
  assert.equal(s.e2eRequestLatency.count, 4);
});

test("the waiting queue's cap, abort, and bad sequences refused at add naming the input", () => {
  const engine = new EmbedEngine({ model, maxNumBatchedTokens: 64, maxNumSeqs: 8, maxWaitingRequests: 1 });
  assert.equal(engine.add({ requestId: "x", sequences: [[2, 3]] }), "added");
  assert.equal(engine.add({ requestId: "y", sequences: [[2, 3]] }), "queue_full");
  assert.equal(engine.abort("x"), true);
  assert.equal(engine.abort("x"), false);
  assert.equal(engine.hasUnfinishedRequests, false);
  const V = model.info.config.vocabSize;
  const refused = (sequences: number[][], argument: string): void =>
    assert.throws(() => engine.add({ requestId: "z", sequences }), (e: unknown) => e instanceof ArgumentError && e.argument === argument);
  refused([[2, 3], [2, V]], "input[1][1]");
  refused([[2, 3], []], "input[1]");
  refused([seq(41, 5)], "input[0]");
  refused([], "input");
  assert.equal(engine.stats().requestSuccess.abort, 1);
});

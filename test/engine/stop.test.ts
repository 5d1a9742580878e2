// Stopping: stop strings held back while they may still match and trimmed
// when they do, stop token ids and EOS, max tokens; on a real tokenizer.
import assert from "node:assert/strict";
import { test } from "node:test";
import { StopChecker, StopStringMatcher, Tokenizer } from "../../src/ops-entry.js";
import { realTokenizerDir } from "../tokenizer/real-tokenizers.js";

const qwen3 = Tokenizer.fromDir(realTokenizerDir("qwen3"));

test("matcher: holds back a possible stop-string prefix, releases it when it cannot match", () => {
  const m = new StopStringMatcher(["STOP", "\n\n"]);
  assert.deepEqual(m.push("Hello S"), { emit: "Hello ", matched: null });
  assert.equal(m.held, "S");
  assert.deepEqual(m.push("T"), { emit: "", matched: null });
  assert.deepEqual(m.push("ar"), { emit: "STar", matched: null }, "STa is not a prefix of STOP");
  assert.deepEqual(m.push(" line\n"), { emit: " line", matched: null });
  assert.deepEqual(m.push("x"), { emit: "\nx", matched: null });
  assert.deepEqual(m.push("end ST"), { emit: "end ", matched: null });
  assert.equal(m.flush(), "ST", "at the end, held text is released");
});

test("matcher: a match across deltas trims it and everything after; the earliest match wins", () => {
  const m = new StopStringMatcher(["</answer>", "##"]);
  assert.deepEqual(m.push("42</ans"), { emit: "42", matched: null });
  assert.deepEqual(m.push("wer> trailing ## text"), { emit: "", matched: "</answer>" });
  assert.deepEqual(m.push("more"), { emit: "", matched: null }, "nothing after a match");
  const early = new StopStringMatcher(["world", "lo w"]);
  assert.deepEqual(early.push("hello world"), { emit: "hel", matched: "lo w" });
  const longest = new StopStringMatcher(["ab", "abc"]);
  assert.deepEqual(longest.push("xabc"), { emit: "x", matched: "abc" }, "same place: the longer one");
  const keep = new StopStringMatcher(["END"], true);
  assert.deepEqual(keep.push("done END tail"), { emit: "done END", matched: "END" });
  assert.throws(() => new StopStringMatcher(["ok", ""]), /stop\[1\] must be a non-empty string/);
});

test("checker on Qwen3: a stop string trimmed from the streamed text, never emitted in part", () => {
  const ids = qwen3.encode("The answer is 42.\n\nObservation: done", { addSpecialTokens: false });
  const c = new StopChecker(qwen3, { maxTokens: 100, stop: ["Observation:"], eosTokenIds: [151645] });
  let streamed = "";
  let last = null;
  for (const id of ids) {
    last = c.push(id);
    streamed += last.delta;
    assert.ok(!streamed.includes("Obs"), `emitted part of the stop string: ${JSON.stringify(streamed)}`);
    if (last.finished) break;
  }
  assert.deepEqual([last!.finishReason, last!.stopReason], ["stop", "Observation:"]);
  assert.equal(streamed, "The answer is 42.\n\n");
  assert.equal(c.text, streamed);
  assert.throws(() => c.push(ids[0]!), /was pushed after the sequence finished \(stop\)/);
});

test("checker: EOS and stop token ids end the sequence without their text; ignoreEos keeps going", () => {
  const hi = qwen3.encode("Hi there", { addSpecialTokens: false });
  const run = (options: Partial<ConstructorParameters<typeof StopChecker>[1]>, ids: number[]) => {
    const c = new StopChecker(qwen3, { maxTokens: 50, eosTokenIds: [151645, 151643], ...options });
    const updates = ids.map((id) => (c.finished ? null : c.push(id))).filter((u) => u !== null);
    return { c, last: updates.at(-1)!, text: updates.map((u) => u.delta).join("") };
  };
  const eos = run({}, [...hi, 151645, ...hi]);
  assert.deepEqual([eos.text, eos.last.finishReason, eos.last.stopReason], ["Hi there", "stop", null]);
  assert.deepEqual(eos.c.ids, [...hi, 151645], "the EOS id is part of the output ids");
  const stopId = run({ stopTokenIds: [hi[1]!] }, [...hi, 151645]);
  assert.deepEqual([stopId.text, stopId.last.finishReason, stopId.last.stopReason], ["Hi", "stop", hi[1]]);
  const ignored = run({ ignoreEos: true, maxTokens: hi.length + 2 }, [...hi, 151645, ...hi]);
  assert.deepEqual([ignored.text, ignored.last.finishReason], ["Hi thereHi", "length"]);
});

test("checker: max tokens ends with 'length' and releases held text and unfinished characters", () => {
  const ids = qwen3.encode("wait S", { addSpecialTokens: false });
  const c = new StopChecker(qwen3, { maxTokens: ids.length, stop: ["STOP"] });
  const deltas = ids.map((id) => c.push(id));
  assert.equal(deltas.at(-1)!.finishReason, "length");
  assert.equal(deltas.map((d) => d.delta).join(""), "wait S", "the held-back ' S' comes out at the end");

  // 🤗 is three byte-level tokens in Qwen ("ĠðŁ", "¤", "Ĺ"): stopping after two leaves U+FFFD, as a full decode would.
  const emoji = qwen3.encode(" 🤗", { addSpecialTokens: false });
  const d = new StopChecker(qwen3, { maxTokens: 2 });
  const out = emoji.slice(0, 2).map((id) => d.push(id).delta);
  assert.equal(out.join(""), qwen3.decode(emoji.slice(0, 2)));
  assert.ok(out[1]!.includes("\uFFFD"));
  assert.throws(() => new StopChecker(qwen3, { maxTokens: 0 }), /maxTokens must be an integer ≥ 1, got 0/);
});

test("checker: a stop string completed by the final token still wins over 'length'", () => {
  const ids = qwen3.encode("abc STOP", { addSpecialTokens: false });
  const c = new StopChecker(qwen3, { maxTokens: ids.length, stop: ["STOP"] });
  const last = ids.map((id) => c.push(id)).at(-1)!;
  assert.deepEqual([last.finishReason, last.stopReason, c.text], ["stop", "STOP", "abc "]);
});

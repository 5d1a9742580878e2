/**
 * Suite `default-model`: how the embedded default model (models/default, trained from
 * WordNet by tools/train-default-model, issue #15) does on the words held out of its
 * training. A measure, not a pass/fail test.
 *
 * - Row `heldout_loss`: mean next-token cross-entropy (nats) over the answer tokens of the
 *   held-out conversations ("What is a W?" → "A W is …" for each held-out noun), computed by
 *   kvflash's own forward pass, against a unigram model of the training tokens (add-one
 *   smoothed counts, tools/train-default-model/unigram.json). Perplexity = exp(loss).
 *   The target (#15): `ppl_over_unigram` < 1/3. A memorizer (#29) never sees a held-out gloss,
 *   so this cannot hold for it; its restatement, row `heldout_refusal_loss`: the same loss
 *   over the same held-out questions with the trained refusal as the answer (the recipe's
 *   refusal.txt, "I don't know that word. …"), against the same unigram baseline, target
 *   `ppl_over_unigram` < 1/3: the model puts its probability on the refusal, not on a made-up
 *   definition. (Only when the words directory holds refusal.txt.)
 * - Rows `define`: the greedy answer to "What is a W?" for every held-out common noun (the
 *   held-out words that WordNet writes in lower case; proper nouns such as "Alabama" are
 *   left out, and so is a held-out word of the chosen vocabulary below: bread). An answer is on topic when it names W or one of W's WordNet synonyms, and
 *   clean when it ends with EOS and repeats no 4-word run. `decoding` says how the answer
 *   was picked: `argmax` (the raw model), or `argmax+repetition_penalty` (greedy under the
 *   model's generation_config.json repetition_penalty, as transformers' generate() does with
 *   do_sample=False). The target (#15): `on_topic_fraction` ≥ 0.6. A memorizer of a chosen
 *   vocabulary (#29) is meant to refuse words it was not taught, and these nouns were never
 *   taught: `refused_fraction` counts clean "I don't know …" answers, and the #29 restatement
 *   of the target is `on_topic_or_refused_fraction` ≥ 0.6 (never a wrong definition).
 *
 * Issue #29's measures (the model as a memorizer of a chosen vocabulary), each under both
 * decodings above:
 * - Rows `vocab_define`: the greedy answer to "What does W mean?" for the chosen words
 *   (tools/train-default-model/vocab.jsonl, by SemCor frequency; all of them, or the first 100
 *   with --quick), judged by bench/definition-rule.ts against the glosses and synsets of W's
 *   top senses. The target: `correct_fraction` ≥ 0.9.
 * - Rows `vocab_what_is`: the same words asked "What is a W?" (a word with a noun sense among
 *   its top senses) or "What is W?" (a verb or adjective), the other form a user types, by the
 *   same rule. Same target.
 * - Rows `ten_words`: the same for dog, happy, run, house, bread, cold, book, tree, music,
 *   water, each answer in the log. The target: `correct` ≥ 9.
 * - Rows `rare_refusal`: "What does W mean?" for the held-out rare words
 *   (tools/train-default-model/rare.jsonl: untagged in SemCor, never trained), answered by a
 *   refusal ("I don't know …")? The target: `refusal_fraction` ≥ 0.8; `defined_fraction` is
 *   how many instead define W rightly by the same rule (WordNet's first sense).
 *
 * Environment (for measuring a candidate before it replaces models/default):
 * DEFAULT_MODEL_BENCH_DIR, a model directory instead of models/default; DEFAULT_MODEL_BENCH_WORDS,
 * a directory holding vocab.jsonl and rare.jsonl instead of the recipe's (a pilot's vocabulary).
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { defaultModelDir } from "../../src/index.js";
import { generate, loadModel, resolveSamplingParams } from "../../src/ops-entry.js";
import type { ChatMessage } from "../../src/tokenizer/chat-template.js";
import type { ForwardBatch } from "../../src/model/forward-batch.js";
import type { SyncModelRunner } from "../../src/model/model-runner.js";
import type { Row, Suite } from "../harness.js";
import { isRefusal, judgeDefinition, type Sense } from "../definition-rule.js";

const RECIPE = join(import.meta.dirname, "..", "..", "..", "tools", "train-default-model");

const TEN = ["dog", "happy", "run", "house", "bread", "cold", "book", "tree", "music", "water"];

interface Chosen {
  word: string;
  senses: Sense[];
}

interface Rare {
  word: string;
  definition: string;
}

function readJsonl<T>(path: string): T[] {
  return readFileSync(path, "utf8").trim().split("\n").map((l) => JSON.parse(l) as T);
}

interface HeldOut {
  word: string;
  synonyms: string[];
  messages: ChatMessage[];
}

/** One sequence's logits at every position: f32 [n, V]. */
function allLogits(runner: SyncModelRunner, ids: readonly number[]): Float32Array {
  const n = ids.length;
  const { blockSize } = runner.kvCache;
  const blocks = Math.ceil(n / blockSize);
  const batch: ForwardBatch = {
    tokens: Int32Array.from(ids),
    positions: Int32Array.from({ length: n }, (_, i) => i),
    cuSeqlensQ: Int32Array.of(0, n),
    seqLens: Int32Array.of(n),
    blockTable: Int32Array.from({ length: blocks }, (_, i) => i),
    maxBlocksPerSeq: blocks,
    slotMapping: Int32Array.from({ length: n }, (_, i) => i),
    logitIndices: Int32Array.from({ length: n }, (_, i) => i),
  };
  return runner.forward(batch);
}

/** −log p(target) from one row of logits. */
function nll(logits: Float32Array, row: number, vocab: number, target: number): number {
  let max = -Infinity;
  for (let v = 0; v < vocab; v++) max = Math.max(max, logits[row * vocab + v]!);
  let sum = 0;
  for (let v = 0; v < vocab; v++) sum += Math.exp(logits[row * vocab + v]! - max);
  return Math.log(sum) + max - logits[row * vocab + target]!;
}

/** W or a synonym as a whole word or phrase, case-insensitively. */
export function namesWord(answer: string, words: readonly string[]): boolean {
  return words.some((w) => new RegExp(`(^|[^a-z])${w.toLowerCase().replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}([^a-z]|$)`).test(answer.toLowerCase()));
}

/** True when some run of 4 words occurs twice: the repetition loop of a small model. */
export function repeatsItself(answer: string): boolean {
  const words = answer.toLowerCase().split(/\s+/).filter(Boolean);
  const seen = new Set<string>();
  for (let i = 0; i + 4 <= words.length; i++) {
    const k = words.slice(i, i + 4).join(" ");
    if (seen.has(k)) return true;
    seen.add(k);
  }
  return false;
}

export const defaultModel: Suite = {
  name: "default-model",
  description: "the default model on held-out WordNet nouns: answer loss vs a unigram baseline, and on-topic greedy definitions",
  run({ rt, quick, log }): Row[] {
    const model = loadModel(rt, process.env.DEFAULT_MODEL_BENCH_DIR ?? defaultModelDir(), { progress: false });
    const wordsDir = process.env.DEFAULT_MODEL_BENCH_WORDS ?? RECIPE;
    const { runner, tokenizer } = model;
    const vocab = runner.vocabSize;
    const heldout: HeldOut[] = readFileSync(join(RECIPE, "heldout.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l) as HeldOut);
    const counts: number[] = JSON.parse(readFileSync(join(RECIPE, "unigram.json"), "utf8")).counts;
    const total = counts.reduce((a, b) => a + b, 0) + counts.length;
    const assistant = tokenizer.tokenToId("<|assistant|>");
    // The chosen vocabulary (#29) is trained by design; a held-out noun in it (bread, one of the
    // ten words) is left out of the held-out measures.
    const chosen = readJsonl<Chosen>(join(wordsDir, "vocab.jsonl"));
    const byWord = new Map(chosen.map((c) => [c.word, c]));
    const common = heldout.filter((h) => h.word[0] === h.word[0]!.toLowerCase() && !byWord.has(h.word));
    const items = quick ? common.slice(0, 60) : common;
    try {
      // Held-out loss on the answer tokens (after <|assistant|>, its </s> included).
      let modelNll = 0;
      let unigramNll = 0;
      let tokens = 0;
      for (const h of items) {
        const ids = tokenizer.encodeChat(h.messages, { addGenerationPrompt: false });
        const logits = allLogits(runner, ids);
        const start = ids.indexOf(assistant!) + 1;
        for (let i = start; i < ids.length; i++) {
          modelNll += nll(logits, i - 1, vocab, ids[i]!);
          unigramNll += -Math.log((counts[ids[i]!]! + 1) / total);
          tokens++;
        }
      }
      const loss = modelNll / tokens;
      const unigram = unigramNll / tokens;
      log(`held-out answer loss ${loss.toFixed(3)} (ppl ${Math.exp(loss).toFixed(1)}), unigram ${unigram.toFixed(3)} (ppl ${Math.exp(unigram).toFixed(1)}), ${tokens} tokens`);
      const rows: Row[] = [
        { measure: "heldout_loss", words: items.length, tokens, heldout_loss: loss, heldout_ppl: Math.exp(loss), unigram_loss: unigram, unigram_ppl: Math.exp(unigram), ppl_over_unigram: Math.exp(loss - unigram) },
      ];
      // #29's restatement for a memorizer: the same questions, the trained refusal as the answer.
      const refusalPath = join(wordsDir, "refusal.txt");
      if (existsSync(refusalPath)) {
        const refusal = readFileSync(refusalPath, "utf8").trim();
        let rNll = 0;
        let rUnigram = 0;
        let rTokens = 0;
        for (const h of items) {
          const ids = tokenizer.encodeChat([h.messages[0]!, { role: "assistant", content: refusal }], { addGenerationPrompt: false });
          const logits = allLogits(runner, ids);
          const start = ids.indexOf(assistant!) + 1;
          for (let i = start; i < ids.length; i++) {
            rNll += nll(logits, i - 1, vocab, ids[i]!);
            rUnigram += -Math.log((counts[ids[i]!]! + 1) / total);
            rTokens++;
          }
        }
        const rl = rNll / rTokens;
        const ru = rUnigram / rTokens;
        log(`held-out refusal loss ${rl.toFixed(3)} (ppl ${Math.exp(rl).toFixed(2)}), unigram ${ru.toFixed(3)} (ppl ${Math.exp(ru).toFixed(1)}), ${rTokens} tokens`);
        rows.push({ measure: "heldout_refusal_loss", words: items.length, tokens: rTokens, heldout_loss: rl, heldout_ppl: Math.exp(rl), unigram_loss: ru, unigram_ppl: Math.exp(ru), ppl_over_unigram: Math.exp(rl - ru) });
      }

      // Greedy "What is a W?" for every held-out common noun.
      const penalty = model.generation.repetitionPenalty;
      const decodings: [string, number | undefined][] = [["argmax", undefined]];
      if (penalty !== null && penalty !== 1) decodings.push(["argmax+repetition_penalty", penalty]);
      for (const [decoding, repetitionPenalty] of decodings) {
        const params = resolveSamplingParams({ temperature: 0, maxTokens: 64, ...(repetitionPenalty ? { repetitionPenalty } : {}) }, vocab);
        let onTopic = 0;
        let clean = 0;
        let refused = 0;
        for (const [k, h] of items.entries()) {
          const promptIds = tokenizer.encodeChat([h.messages[0]!]);
          const r = generate({ runner, tokenizer, eosTokenIds: model.eosTokenIds, promptIds, params });
          const ok = r.finishReason === "stop" && !repeatsItself(r.text);
          const topic = namesWord(r.text, [h.word, ...h.synonyms]);
          if (ok) clean++;
          if (ok && topic) onTopic++;
          else if (ok && isRefusal(r.text.trim())) refused++;
          if (k < 6) log(`  [${decoding}] ${String(h.messages[0]!.content)} → ${r.text.trim()}${ok && topic ? "" : "   [off]"}`);
        }
        rows.push({
          measure: "define",
          decoding,
          repetition_penalty: repetitionPenalty ?? 1,
          words: items.length,
          clean_fraction: clean / items.length,
          on_topic_fraction: onTopic / items.length,
          refused_fraction: refused / items.length,
          on_topic_or_refused_fraction: (onTopic + refused) / items.length,
        });
        log(`${decoding}: ${onTopic}/${items.length} definitions clean and on topic, ${refused} refused`);
      }

      // Issue #29: the chosen words, the ten, and refusals of rare words.
      const ten = TEN.map((w) => byWord.get(w)).filter((c): c is Chosen => c !== undefined);
      const vocabItems = quick ? chosen.slice(0, 100) : chosen;
      const rare = readJsonl<Rare>(join(wordsDir, "rare.jsonl"));
      const rareItems = quick ? rare.slice(0, 60) : rare;
      for (const [decoding, repetitionPenalty] of decodings) {
        const params = resolveSamplingParams({ temperature: 0, maxTokens: 80, ...(repetitionPenalty ? { repetitionPenalty } : {}) }, vocab);
        const ask = (w: string, question = `What does ${w} mean?`): string => {
          const promptIds = tokenizer.encodeChat([{ role: "user", content: question }]);
          return generate({ runner, tokenizer, eosTokenIds: model.eosTokenIds, promptIds, params }).text.trim();
        };
        let correct = 0;
        let refused = 0;
        for (const c of vocabItems) {
          const a = ask(c.word);
          if (judgeDefinition(a, c.word, c.senses) !== null) correct++;
          if (isRefusal(a)) refused++;
        }
        rows.push({ measure: "vocab_define", decoding, words: vocabItems.length, correct_fraction: correct / vocabItems.length, refusal_fraction: refused / vocabItems.length });
        log(`${decoding}: ${correct}/${vocabItems.length} chosen words defined correctly, ${refused} refused`);
        let whatCorrect = 0;
        for (const [k, c] of vocabItems.entries()) {
          const q = c.senses.some((s) => s.pos === "n") ? `What is ${/^[aeiou]/i.test(c.word) ? "an" : "a"} ${c.word}?` : `What is ${c.word}?`;
          const a = ask(c.word, q);
          const verdict = judgeDefinition(a, c.word, c.senses);
          if (verdict !== null) whatCorrect++;
          if (k < 4) log(`  [${decoding}] ${q} → ${a}   [${verdict ?? "wrong"}]`);
        }
        rows.push({ measure: "vocab_what_is", decoding, words: vocabItems.length, correct_fraction: whatCorrect / vocabItems.length });
        log(`${decoding}: ${whatCorrect}/${vocabItems.length} chosen words defined correctly asked "What is (a) W?"`);
        let tenCorrect = 0;
        for (const c of ten) {
          const a = ask(c.word);
          const verdict = judgeDefinition(a, c.word, c.senses);
          if (verdict !== null) tenCorrect++;
          log(`  [${decoding}] What does ${c.word} mean? → ${a}   [${verdict ?? "wrong"}]`);
        }
        rows.push({ measure: "ten_words", decoding, words: ten.length, correct: tenCorrect });
        let rareRefused = 0;
        let rareDefined = 0;
        for (const [k, r] of rareItems.entries()) {
          const a = ask(r.word);
          if (isRefusal(a)) rareRefused++;
          if (judgeDefinition(a, r.word, [{ pos: "", definition: r.definition, synonyms: [] }]) !== null) rareDefined++;
          if (k < 4) log(`  [${decoding}] What does ${r.word} mean? → ${a}`);
        }
        rows.push({ measure: "rare_refusal", decoding, words: rareItems.length, refusal_fraction: rareRefused / rareItems.length, defined_fraction: rareDefined / rareItems.length });
        log(`${decoding}: ${rareRefused}/${rareItems.length} rare words refused, ${rareDefined} defined rightly`);
      }
      return rows;
    } finally {
      runner.dispose();
    }
  },
};

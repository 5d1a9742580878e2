// Renders the corpus through the default model's own chat template and tokenizer, with
// kvflash's Tokenizer (the code that serves the model), so training sees exactly the ids
// that inference will see.
//
// Usage: node tokenize.mjs <model dir> <conversations.jsonl> <out prefix>
// Writes <out>.ids.u16 (all conversations, each "<s><|user|>…<|assistant|>…</s>", back to
// back, uint16 little-endian) and <out>.answer.u8 (1 where the token is part of an assistant
// answer, its </s> included: the tokens the held-out loss is measured on), and
// <out>.unigram.json ({"counts": [V]}: how often each id occurs, the unigram baseline of
// `npm run bench -- default-model`).
import { createReadStream, writeFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { Tokenizer } from "../../dist/src/tokenizer/tokenizer.js";

const [dir, corpus, out] = process.argv.slice(2);
if (!dir || !corpus || !out) throw new Error("usage: node tokenize.mjs <model dir> <conversations.jsonl> <out prefix>");
const tok = Tokenizer.fromDir(dir);
const assistant = tok.tokenToId("<|assistant|>");
const user = tok.tokenToId("<|user|>");
let ids = new Uint16Array(1 << 20);
let n = 0;
const push = (id) => {
  if (n === ids.length) { const g = new Uint16Array(ids.length * 2); g.set(ids); ids = g; }
  ids[n++] = id;
};
let conversations = 0;
for await (const line of createInterface({ input: createReadStream(corpus) })) {
  if (!line) continue;
  const { messages } = JSON.parse(line);
  for (const id of tok.encodeChat(messages, { addGenerationPrompt: false })) push(id);
  conversations++;
}
const answer = new Uint8Array(n);
let inAnswer = false;
for (let i = 0; i < n; i++) {
  if (ids[i] === assistant) { inAnswer = true; continue; }
  if (ids[i] === user) inAnswer = false;
  answer[i] = inAnswer ? 1 : 0;
  if (ids[i] === tok.eosTokenId) inAnswer = false;
}
writeFileSync(`${out}.ids.u16`, Buffer.from(ids.buffer, 0, n * 2));
writeFileSync(`${out}.answer.u8`, answer);
const counts = new Array(tok.vocabSize).fill(0);
for (let i = 0; i < n; i++) counts[ids[i]]++;
writeFileSync(`${out}.unigram.json`, JSON.stringify({ counts }) + "\n");
console.log(JSON.stringify({ conversations, tokens: n, answer_tokens: answer.reduce((a, b) => a + b, 0) }));

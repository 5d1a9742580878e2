// Calls never go upward (../shared/ARCHITECTURE.md, "Layers"), checked for the lower layers the
// model's sources and the ggml type table were cut along (issue 31): no file under a layer's
// folder imports, even as a type, a file under a folder above it. src/sources/ (hub, model-source
// resolution, safetensors, the GGUF format) sits under src/model/: it reads bytes and finds them,
// and knows nothing of the config, the weights or the forward. src/tensor/ (dtypes, codecs, the
// ggml type table) is below everything but the runtime; ops/ is below model/ and sources/.
import assert from "node:assert/strict";
import { test } from "node:test";
import { type ImportEdge, importGraph, repoRoot } from "../helpers/import-graph.js";

const graph = importGraph(repoRoot(import.meta.url), "src");

/** Folder under src/ → the folders under src/ its files may not import. */
const FORBIDDEN: Record<string, string[]> = {
  tensor: ["ops", "attention", "kv", "gpu", "tokenizer", "sources", "model", "engine", "server", "llm", "cli", "structured"],
  ops: ["kv", "gpu", "sources", "model", "engine", "server", "llm", "cli"],
  sources: ["ops", "attention", "kv", "gpu", "model", "engine", "server", "llm", "cli"],
};

/** The imports that break FORBIDDEN in `g`, as "from → to". */
function offences(g: Map<string, ImportEdge[]>): string[] {
  const out: string[] = [];
  for (const [file, edges] of g) {
    const layer = file.split("/")[1]!;
    const banned = FORBIDDEN[layer];
    if (banned === undefined) continue;
    for (const e of edges) if (banned.includes(e.to.split("/")[1]!)) out.push(`${file} → ${e.to}`);
  }
  return out;
}

test("src/tensor, src/ops and src/sources import nothing from the layers above them, type-only imports included", () => {
  assert.ok(graph.has("src/sources/source.ts") && graph.has("src/tensor/ggml-types.ts"));
  assert.deepEqual(offences(graph), []);
});

test("an upward import is found (the check can fail)", () => {
  const g = new Map(graph);
  g.set("src/sources/gguf/reader.ts", [...graph.get("src/sources/gguf/reader.ts")!, { to: "src/model/decoder.ts", kind: "static", typeOnly: true }]);
  assert.deepEqual(offences(g), ["src/sources/gguf/reader.ts → src/model/decoder.ts"]);
});

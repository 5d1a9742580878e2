// The product does not reach the fixtures (../shared/STYLE.md: "Test fixtures and benchmarks
// reachable from the product's entry points" is a review finding): no source file under src/
// outside src/testing imports a fixture, statically, as a type, dynamically or as a worker or
// loader URL. The fixtures are src/testing/ and the modules kvflash/testing re-exports values
// from elsewhere (synthetic models, the reference decoder, the GGUF writer and converter); its
// `export type` lines name product types that fixtures take (GgmlTypeName, WeightDType).
import assert from "node:assert/strict";
import { test } from "node:test";
import { importGraph, reachable, repoRoot } from "../helpers/import-graph.js";

const ROOT = repoRoot(import.meta.url);
const graph = importGraph(ROOT);
const TESTING_ENTRY = "src/testing/index.ts";

/** src/testing/ and the modules its entry re-exports values from. */
function fixtures(): Set<string> {
  const set = new Set([...graph.keys()].filter((f) => f.startsWith("src/testing/")));
  for (const e of graph.get(TESTING_ENTRY)!) if (!e.typeOnly) set.add(e.to);
  return set;
}

test("kvflash/testing re-exports the synthetic models, the reference decoder and the GGUF writer", () => {
  const f = fixtures();
  for (const file of ["src/model/synthetic-model.ts", "src/model/reference-decoder.ts", "src/sources/gguf/writer.ts", "src/model/gguf/convert.ts"]) assert.ok(f.has(file), `${file} is not a fixture`);
});

test("no product file imports a fixture", () => {
  const f = fixtures();
  const offences: string[] = [];
  for (const [file, edges] of graph) {
    if (f.has(file)) continue;
    for (const e of edges) if (f.has(e.to)) offences.push(`${file} → ${e.to} (${e.kind})`);
  }
  assert.deepEqual(offences, []);
});

test("the product's entry points and workers reach no fixture", () => {
  const entries = ["src/index.ts", "src/ops-entry.ts", "src/gpu/index.ts", "src/cli/main.ts"];
  const f = fixtures();
  const reached = [...reachable(graph, entries)].filter((x) => f.has(x));
  assert.deepEqual(reached, []);
  // The walk follows worker and loader URLs: the engine worker and the default loader are reached.
  const all = reachable(graph, entries);
  for (const file of ["src/engine/engine-worker.ts", "src/model/default-loader.ts"]) assert.ok(all.has(file), `${file} not reached`);
});

test("the walk sees an import of a fixture (the check can fail)", () => {
  const g = new Map(graph);
  g.set("src/model/loader.ts", [...graph.get("src/model/loader.ts")!, { to: "src/model/synthetic-model.ts", kind: "static", typeOnly: true }]);
  assert.ok(reachable(g, ["src/index.ts"]).has("src/model/synthetic-model.ts"));
});

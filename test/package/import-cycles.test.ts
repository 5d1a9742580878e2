// No import cycle in the sources, type-only ones included (a cycle of `import type` is still two
// modules that cannot be understood apart, and one value import away from an initialization-order
// bug): the graph of src/, bench/ and test/ (test/helpers/import-graph.ts, read with the
// TypeScript parser) has no strongly connected component of more than one module. Cycles found
// and cut so far, each by a small leaf module of the shared types: engine-config ↔ protocol ↔
// engine (engine-settings.ts), model/source ↔ hub (model-source.ts), the GGUF reader ↔ metadata
// (gguf/value.ts), the tool parsers (tool-parse-types.ts, tool-plan.ts), bench harness ↔ ceilings.
import assert from "node:assert/strict";
import { test } from "node:test";
import { type ImportEdge, importGraph, repoRoot, staticCycles } from "../helpers/import-graph.js";

const ROOT = repoRoot(import.meta.url);
const src = importGraph(ROOT, "src");

for (const dir of ["src", "bench", "test"]) {
  test(`${dir}/ has no import cycle, type-only imports included`, () => {
    const cycles = staticCycles(dir === "src" ? src : importGraph(ROOT, dir)).map((c) => c.join(" → "));
    assert.deepEqual(cycles, []);
  });
}

test("type-only imports, re-exports and import() types count as edges", () => {
  const edges = (f: string): ImportEdge[] => src.get(f) ?? [];
  // `import type { EngineOutput, EngineRequest } from "./engine.js"` in protocol.ts
  assert.ok(edges("src/engine/protocol.ts").some((e) => e.to === "src/engine/engine.ts" && e.kind === "static"));
  // `export … from` in the entry
  assert.ok(edges("src/index.ts").some((e) => e.to === "src/llm/llm.ts"));
});

test("a cycle through a type-only import is found, with its path", () => {
  const g = new Map<string, ImportEdge[]>([
    ["a.ts", [{ to: "b.ts", kind: "static", typeOnly: false }]],
    ["b.ts", [{ to: "c.ts", kind: "static", typeOnly: false }]],
    ["c.ts", [{ to: "a.ts", kind: "static", typeOnly: false }, { to: "d.ts", kind: "static", typeOnly: false }]],
    ["d.ts", [{ to: "d.ts", kind: "runtime", typeOnly: false }]],
  ]);
  assert.deepEqual(staticCycles(g), [["a.ts", "b.ts", "c.ts", "a.ts"]]);
  // A run-time edge (a worker URL, a dynamic import) closes no cycle: nothing is evaluated at import time.
  g.set("d.ts", [{ to: "d.ts", kind: "static", typeOnly: false }]);
  assert.deepEqual(staticCycles(g).map((c) => c.join(" ")).sort(), ["a.ts b.ts c.ts a.ts", "d.ts d.ts"]);
});

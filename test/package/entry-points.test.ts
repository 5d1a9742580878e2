// The package's entry points hold one layer each (../shared/ARCHITECTURE.md, "The front door is
// small"): kvflash is the high-level API, serve, the model sources, the errors and the types they
// use, each name chosen and pinned here (adding one is a decision, made in this list); the kernels
// and the runtime are kvflash/ops; fixtures are kvflash/testing. README's table of the entry points
// states each count, checked against the sources here.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { exportedNames, repoRoot } from "../helpers/import-graph.js";

const ROOT = repoRoot(import.meta.url);

const MAIN = [
  "ArgumentError", "CachedRepo", "CachedSnapshot", "ChatCompletion", "ChatCompletionChunk", "ChatCompletionMessage", "ChatContentPart",
  "ChatDelta", "ChatMessage", "ChatOptions", "ChatResult", "CompleteOptions", "CompleteResult", "Completion", "EmbedOptions", "EmbedResult", "EmbeddingInfo", "EngineInfo", "EngineSettings", "EngineTask",
  "HubCache", "HubError", "HubErrorKind", "HubSettings", "JsonSchema", "KernelError", "KvDtypeSetting", "LLM", "LLMError", "LoadOptions", "LoadSettings",
  "LoadProgressEvent", "ModelSource", "OutOfMemoryError", "ProgressOptions", "ProgressStream", "ResolveModelOptions", "ResolvedModel",
  "RerankOptions", "RerankResult", "ResponseFormat", "RunningServer", "SamplingOptions", "ServeOptions", "SpeculativeConfig", "ToolCall", "ToolChoice", "ToolDefinition", "ToolParserName", "Usage",
  "WeightsSetting", "defaultModelDir", "hubSettings",
  "localModelSource", "resolveModelSource", "serve",
];

const ENTRIES: Record<string, string> = {
  kvflash: "src/index.ts",
  "kvflash/ops": "src/ops-entry.ts",
  "kvflash/gpu": "src/gpu/index.ts",
  "kvflash/testing": "src/testing/index.ts",
};

test("kvflash exports the chosen names, no more", () => {
  assert.deepEqual(exportedNames(ROOT, ENTRIES["kvflash"]!), [...MAIN].sort());
});

test("package.json's exports map each entry to its compiled module and .d.ts", () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { exports: Record<string, { types: string; default: string }> };
  for (const [entry, src] of Object.entries(ENTRIES)) {
    const key = entry === "kvflash" ? "." : `./${entry.slice("kvflash/".length)}`;
    const js = `./dist/${src.replace(/\.ts$/, ".js")}`;
    assert.deepEqual(pkg.exports[key], { types: js.replace(/\.js$/, ".d.ts"), default: js }, key);
  }
  assert.deepEqual(Object.keys(pkg.exports).sort(), [".", "./gpu", "./ops", "./testing"]);
});

test("the running entry points export what their sources say (values; types vanish)", async () => {
  for (const [entry, src] of Object.entries(ENTRIES)) {
    if (entry === "kvflash/gpu") continue; // needs the optional webgpu package only when used, but keep this test free of it
    const mod = (await import(entry)) as Record<string, unknown>;
    const names = new Set(exportedNames(ROOT, src));
    for (const k of Object.keys(mod)) assert.ok(names.has(k), `${entry} exports ${k} at run time`);
  }
  const main = (await import("kvflash")) as Record<string, unknown>;
  for (const kernel of ["createRuntime", "flashAttention", "loadModel", "generate", "createSyntheticModel", "writeGguf"]) assert.equal(main[kernel], undefined, `kvflash exports ${kernel}`);
  const ops = (await import("kvflash/ops")) as Record<string, unknown>;
  for (const name of ["createRuntime", "flashAttention", "pagedAttention", "linear", "Tensor", "loadModel", "generate"]) assert.equal(typeof ops[name], "function", `kvflash/ops lacks ${name}`);
  for (const fixture of ["createSyntheticModel", "referenceForward", "writeGguf", "writeTinyModel"]) assert.equal(ops[fixture], undefined, `kvflash/ops exports ${fixture}`);
});

test("README's table states each entry point's export count", () => {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  for (const [entry, src] of Object.entries(ENTRIES)) {
    const row = new RegExp("^\\| `" + entry.replace("/", "\\/") + "` \\| (\\d+) \\|", "m").exec(readme);
    assert.ok(row, `README.md has no row for ${entry}`);
    assert.equal(Number(row[1]), exportedNames(ROOT, src).length, `README.md's count for ${entry}`);
  }
});

// The ModelSource type on its own, a leaf: source.ts resolves specs into it and the hub's
// pull-model.ts returns one, so neither imports the other for it (no import cycle, type-only
// ones included; test/package/import-cycles.test.ts). ARCHITECTURE.md: "Models come from where
// users keep them", resolved once at the edge into this one typed value.

/** Where a model's files are: a Hugging Face model directory, or one GGUF file (the first part of a split one). */
export type ModelSource = { kind: "dir"; path: string } | { kind: "gguf"; path: string };

// `kvflash generate` flags are checked as they are parsed, before any model
// loads, and errors name the flag the user typed (not the library's field).
import assert from "node:assert/strict";
import { test } from "node:test";
import { parseGenerateArgs, parseLogitsArgs } from "../../src/cli/generate-args.js";
import { type LoadModelOptions } from "../../src/ops-entry.js";
import { type ModelLoadOptions } from "../../src/engine/loader-module.js";
import { type ServeOptions } from "../../src/index.js";

test("sampling flags out of range name the flag", () => {
  const bad = (flag: string, value: string): (() => unknown) => () => parseGenerateArgs(["--prompt", "x", flag, value]);
  assert.throws(bad("--top-p", "2"), /^ArgumentError: --top-p must be ≤ 1, got 2$/);
  assert.throws(bad("--top-p", "0"), /^ArgumentError: --top-p must be > 0, got 0$/);
  assert.throws(bad("--temperature", "-1"), /^ArgumentError: --temperature must be ≥ 0, got -1$/);
  assert.throws(bad("--min-p", "1.5"), /^ArgumentError: --min-p must be ≤ 1, got 1.5$/);
  assert.throws(bad("--repetition-penalty", "0"), /^ArgumentError: --repetition-penalty must be > 0, got 0$/);
  assert.throws(bad("--presence-penalty", "3"), /^ArgumentError: --presence-penalty must be ≤ 2, got 3$/);
  assert.throws(bad("--frequency-penalty", "-2.5"), /^ArgumentError: --frequency-penalty must be ≥ -2, got -2.5$/);
  assert.throws(() => parseGenerateArgs(["--prompt", "x", "--stop", "a", "--stop="]), /^ArgumentError: --stop must be a non-empty string, got ""$/);
  assert.deepEqual(parseGenerateArgs(["--prompt", "x", "--top-p", "0.9", "--temperature", "0"]).sampling, { topP: 0.9, temperature: 0 });
});

test("--weights and --kv-dtype take their literal settings only", () => {
  assert.throws(() => parseGenerateArgs(["--prompt", "x", "--weights", "q5"]), /^ArgumentError: --weights must be one of .*"auto", got "q5"$/);
  assert.throws(() => parseLogitsArgs(["--ids", "1", "--kv-dtype", "fp4"]), /^ArgumentError: --kv-dtype must be one of .*, got "fp4"$/);
  const a = parseGenerateArgs(["--prompt", "x", "--weights", "q4", "--kv-dtype", "fp8"]);
  assert.equal(a.weights, "q4");
  assert.equal(a.kvDtype, "fp8");
  // The library types are literal unions: a misspelt setting does not compile.
  // @ts-expect-error "q5" is not a WeightsSetting
  const w: LoadModelOptions = { weights: "q5" };
  // @ts-expect-error "int4" is not a KvDtypeSetting
  const k: ModelLoadOptions = { source: { kind: "dir", path: "/m" }, kvDtype: "int4" };
  // @ts-expect-error "fp16" is not a KvDtypeSetting
  const s: ServeOptions = { kvDtype: "fp16" };
  assert.ok(w && k && s);
});

test("--device takes cpu | webgpu | auto (generate and logits) and names itself and the value otherwise", () => {
  assert.equal(parseGenerateArgs(["--prompt", "x", "--device", "webgpu"]).device, "webgpu");
  assert.equal(parseLogitsArgs(["--ids", "1,2", "--device=auto"]).device, "auto");
  assert.equal(parseGenerateArgs(["--prompt", "x"]).device, undefined);
  assert.throws(() => parseGenerateArgs(["--prompt", "x", "--device", "cuda"]), /^ArgumentError: --device must be one of cpu \| webgpu \| auto, got "cuda"$/);
});

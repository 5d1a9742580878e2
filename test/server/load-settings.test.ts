// One load-settings type, resolved once at the edge (src/model/load-settings.ts): `kvflash serve`'s
// flags, serve()'s options and LLM.load's options hand the engine worker the same LoadConfig for
// the same inputs (read back through a loader that echoes what it got, settings-echo-loader.ts),
// `kvflash generate`'s flags resolve to it too, and maxModelLen is resolved against the model's
// config (src/model/max-model-len.ts) with an error naming the setting (or its flag) and the value.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { parseGenerateArgs } from "../../src/cli/generate-args.js";
import { parseServeArgs } from "../../src/cli/serve-args.js";
import { ArgumentError, LLM, defaultModelDir, serve } from "../../src/index.js";
import { parseModelConfig } from "../../src/model/config.js";
import { type LoadSettings, resolveLoadConfig } from "../../src/model/load-settings.js";
import { checkMaxModelLen, modelLengthLimit } from "../../src/model/max-model-len.js";
import { startServer } from "./harness.js";

const CLI = fileURLToPath(new URL("../../src/cli/main.js", import.meta.url));
const ECHO_LOADER = fileURLToPath(new URL("./settings-echo-loader.js", import.meta.url));
const ECHO_URL = new URL("./settings-echo-loader.js", import.meta.url).href;

/** The same settings, as options and as flags. */
const SETTINGS: LoadSettings = { weights: "q8", kvDtype: "bf16", blockSize: 8, numBlocks: 32, maxModelLen: 128, device: "cpu", threads: 1, kernels: "baseline" };
const FLAGS = ["--weights", "q8", "--kv-dtype", "bf16", "--block-size", "8", "--num-gpu-blocks-override", "32", "--max-model-len", "128", "--device", "cpu", "--threads", "1", "--kernels", "baseline"];

/** The settings the echo loader was given, from EngineInfo.placement. */
function echoed(placement: string | undefined): unknown {
  const m = /load settings (\{.*\})/.exec(placement ?? "");
  assert.ok(m, `no echoed settings in ${JSON.stringify(placement)}`);
  return JSON.parse(m[1]!) as unknown;
}

test("serve flags, serve() options and LLM.load options give the engine worker the same load settings", { timeout: 60_000 }, async () => {
  const want = resolveLoadConfig(SETTINGS);
  assert.deepEqual(want, { weights: "q8", kvDtype: "bf16", blockSize: 8, numBlocks: 32, maxModelLen: 128, device: "cpu", threads: 1, kernels: "baseline" });
  // The parsers read the flags into the library's LoadSettings, and the one resolver gives the same object.
  assert.deepEqual(resolveLoadConfig(parseServeArgs(FLAGS, {})), want);
  assert.deepEqual(resolveLoadConfig(parseGenerateArgs(["--prompt", "x", ...FLAGS])), want);

  const running = await serve({ ...SETTINGS, loader: ECHO_URL, port: 0 });
  const viaServe = await running.ready;
  await running.close();
  const llm = await LLM.load({ ...SETTINGS, loader: ECHO_URL });
  const viaLlm = llm.info;
  await llm.close();
  const cli = await startServer(["--loader", ECHO_LOADER, ...FLAGS]);
  const ready = /ready in .*/.exec(cli.stderr())?.[0];
  await cli.stop();

  assert.deepEqual(echoed(viaServe.placement), want);
  assert.deepEqual(echoed(viaLlm.placement), want);
  assert.deepEqual(echoed(ready), want);
  // And the engine each one runs: 32 blocks of 8 tokens, 128 tokens of context.
  for (const info of [viaServe, viaLlm]) assert.deepEqual([info.numBlocks, info.blockSize, info.maxModelLen, info.threads], [32, 8, 128, 1]);
  assert.match(ready!, /max_model_len 128, 32 KV blocks × 8 tokens/);
});

test("defaults come from one table and resolving is idempotent", () => {
  const defaults = resolveLoadConfig({});
  assert.deepEqual(defaults, { weights: "auto", kvDtype: "auto", blockSize: 16, device: "cpu" });
  assert.deepEqual(resolveLoadConfig(defaults), defaults);
  assert.deepEqual(resolveLoadConfig(resolveLoadConfig(SETTINGS)), resolveLoadConfig(SETTINGS));
});

test("a bad load setting is an error naming the setting and the value, from the resolver and from serve() before anything starts", async () => {
  const cases: [LoadSettings, RegExp][] = [
    [{ weights: "q3" as never }, /^ArgumentError: weights must be one of "f32" \| "bf16" \| "q8" \| "q4" \| "auto", got "q3"$/],
    [{ kvDtype: "int4" as never }, /^ArgumentError: kvDtype must be one of .*"auto".*, got "int4"$/],
    [{ blockSize: 512 }, /^ArgumentError: blockSize must be ≤ 256, got 512$/],
    [{ blockSize: 0 }, /^ArgumentError: blockSize must be ≥ 1, got 0$/],
    [{ maxModelLen: 1 }, /^ArgumentError: maxModelLen must be ≥ 2, got 1$/],
    [{ maxModelLen: 2.5 }, /^ArgumentError: maxModelLen must be an integer, got 2\.5$/],
    [{ device: "tpu" as never }, /^ArgumentError: device must be one of cpu \| webgpu \| auto, got "tpu"$/],
    [{ threads: 0 }, /^ArgumentError: threads must be ≥ 1, got 0$/],
    [{ kernels: "fast" as never }, /^ArgumentError: kernels must be one of "baseline" \| "relaxed", got "fast"$/],
    [{ numBlocks: 8, kvCacheBytes: 1 << 20 }, /^ArgumentError: kvCacheBytes and numBlocks both size the KV cache: give one, got 1048576 and 8$/],
  ];
  for (const [settings, message] of cases) {
    assert.throws(() => resolveLoadConfig(settings), message, JSON.stringify(settings));
  }
  await assert.rejects(serve({ blockSize: 0, port: 0 }), /^ArgumentError: blockSize must be ≥ 1, got 0$/);
});

test("maxModelLen beyond what the model allows: LLM.load and `kvflash serve` name the setting (or its flag), the value and the model's limit", { timeout: 60_000 }, async () => {
  const limit = (JSON.parse(readFileSync(join(defaultModelDir(), "config.json"), "utf8")) as { max_position_embeddings: number }).max_position_embeddings;
  const message = new RegExp(`maxModelLen must be ≤ ${limit}, what the model allows \\(max_position_embeddings ${limit} in config\\.json\\), got ${limit + 1}$`);
  await assert.rejects(LLM.load({ maxModelLen: limit + 1 }), (e: unknown) => e instanceof ArgumentError && e.argument === "maxModelLen" && message.test(e.message));
  // At the limit it loads, and every layer reads the one value.
  const llm = await LLM.load({ maxModelLen: limit, threads: 1 });
  assert.equal(llm.info.maxModelLen, limit);
  await llm.close();
  const cli = spawn(process.execPath, [CLI, "serve", "--port", "0", "--threads", "1", "--max-model-len", String(limit + 1)], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  cli.stderr.setEncoding("utf8").on("data", (c: string) => (stderr += c));
  const code = await new Promise<number | null>((resolve) => cli.once("exit", resolve));
  assert.equal(code, 1, stderr);
  assert.match(stderr, new RegExp(`--max-model-len must be ≤ ${limit}, what the model allows \\(max_position_embeddings ${limit} in config\\.json\\), got ${limit + 1}`));
});

test("the model's limit: max_position_embeddings, × a linear RoPE factor, a GGUF's context_length as it stands", () => {
  const base = JSON.parse(readFileSync(join(defaultModelDir(), "config.json"), "utf8")) as Record<string, unknown>;
  const positions = base["max_position_embeddings"] as number;
  const plain = parseModelConfig(base);
  assert.deepEqual(modelLengthLimit(plain), { tokens: positions, from: `max_position_embeddings ${positions} in config.json` });
  const linear = parseModelConfig({ ...base, rope_scaling: { rope_type: "linear", factor: 4 } });
  assert.deepEqual(modelLengthLimit(linear), { tokens: positions * 4, from: `max_position_embeddings ${positions} × rope_scaling factor 4 = ${positions * 4} in config.json` });
  assert.deepEqual(modelLengthLimit(linear, true), { tokens: positions, from: `context_length ${positions} in the GGUF` });
  assert.equal(checkMaxModelLen(positions * 4, modelLengthLimit(linear)), positions * 4);
  assert.equal(checkMaxModelLen(undefined, modelLengthLimit(linear)), undefined);
  assert.throws(() => checkMaxModelLen(positions * 4 + 1, modelLengthLimit(linear)), new RegExp(`^ArgumentError: maxModelLen must be ≤ ${positions * 4}, what the model allows \\(max_position_embeddings ${positions} × rope_scaling factor 4 = ${positions * 4} in config\\.json\\), got ${positions * 4 + 1}$`));
});

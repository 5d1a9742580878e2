/**
 * `kvflash generate` and `kvflash logits`: load the model (loadModel), run
 * the library (generate / promptLogits), print. Text goes to stdout, progress
 * and speed to stderr.
 */
import { generate, promptLogits } from "../engine/offline-generate.js";
import { resolveSamplingParams, samplingDefaults } from "../engine/sampling-params.js";
import { topN } from "../engine/sampler.js";
import { defaultModelDir } from "../model/default-model.js";
import { type LoadModelOptions, type LoadedModel, type LoadedModelInfo, loadModel } from "../model/loader.js";
import type { ModelRunner } from "../model/model-runner.js";
import { GpuDevice } from "../gpu/device.js";
import { loadGpuModel } from "../gpu/load-model.js";
import { formatBytes } from "../runtime/allocator.js";
import { describePlacement } from "../model/placement.js";
import type { ModelSource } from "../sources/source.js";
import { describeKernels } from "../runtime/module.js";
import { type Runtime, createRuntime } from "../runtime/runtime.js";
import { ArgumentError } from "../errors.js";
import { type ModelArgs, parseGenerateArgs, parseLogitsArgs } from "./generate-args.js";
import { resolveModelArg } from "./hub.js";
import { checkModelDirArg } from "./model-dir-arg.js";
import { type DraftModelProposer, createDraftProposer } from "../engine/draft-model-proposer.js";
import { asFlagError } from "./load-flags.js";
import { type LoadConfig, resolveLoadConfig } from "../model/load-settings.js";
import { modelRuntimeOptions } from "../model/gguf/kquant-source.js";

/** Default --max-tokens when generation_config.json has no max_new_tokens. */
const DEFAULT_MAX_TOKENS = 128;

const say = (line: string): void => {
  process.stderr.write(`${line}\n`);
};

/** What the commands use of a loaded model, on the CPU (Decoder) or a WebGPU device (GpuModelRunner). */
type CommandModel = LoadedModelInfo & { runner: ModelRunner };

/** Loads the model with the load settings resolved once, runs `run` with it (and with those settings), disposes of it. */
async function withModel<T>(args: ModelArgs, run: (model: CommandModel, rt: Runtime, load: LoadConfig) => T | Promise<T>): Promise<T> {
  if (args.model === undefined && args.revision !== undefined) throw new ArgumentError("--revision", "needs a hub --model (org/name)");
  // The load settings, resolved once by the library's resolver (as serve() does); an error names the flag.
  let load: LoadConfig;
  try {
    load = resolveLoadConfig(args);
  } catch (e) {
    throw asFlagError(e);
  }
  // --model becomes a typed source before the runtime starts (downloading if need be).
  const source: ModelSource = args.model === undefined ? { kind: "dir", path: defaultModelDir() } : (await resolveModelArg(args.model, args.revision, say)).source;
  checkModelDirArg(source);
  const rt = await createRuntime(modelRuntimeOptions(load, source)).catch((e: unknown) => {
    throw asFlagError(e);
  });
  try {
    const t0 = performance.now();
    // The settings whole; a bar on a terminal, on a pipe or a log file a line per 10 % (as serve prints).
    const options: LoadModelOptions = { ...load, progress: true };
    const seconds = () => `${((performance.now() - t0) / 1000).toFixed(2)} s`;
    const gpu = load.device === "cpu" ? null : await GpuDevice.open({ device: load.device === "auto" ? "auto" : "webgpu" });
    if (gpu === null && load.device === "auto") say("--device auto: no hardware WebGPU adapter, running on the CPU");
    let model: CommandModel;
    try {
      model = gpu !== null ? await loadOnGpu(rt, gpu, source, options, seconds) : loadOnCpu(rt, source, options, seconds);
    } catch (e) {
      throw asFlagError(e);
    }
    try {
      return await run(model, rt, load);
    } finally {
      model.runner.dispose();
    }
  } finally {
    await rt.dispose();
  }
}

/**
 * --speculative-config with a draft model: resolve it and load it on the CPU
 * with the target's load settings (as the engine worker does; its context is
 * the target's), and pair it with the target (same vocabulary); null for
 * prompt lookup or no speculation.
 */
async function loadDraft(args: ModelArgs, load: LoadConfig, target: CommandModel, rt: Runtime): Promise<DraftModelProposer | null> {
  const spec = args.speculativeConfig;
  if (spec?.method !== "draft_model") return null;
  const source = (await resolveModelArg(spec.model, undefined, say)).source;
  checkModelDirArg(source);
  let m: LoadedModel;
  try {
    m = loadModel(rt, source, { ...load, device: "cpu", maxModelLen: target.runner.maxModelLen, progress: false });
  } catch (e) {
    throw asFlagError(e);
  }
  try {
    const proposer = createDraftProposer({ name: target.source.path, tokenizer: target.tokenizer, runner: target.runner }, { name: source.path, tokenizer: m.tokenizer, runner: m.runner }, { sampled: spec.draftSampling === "sampled" });
    say(`draft model ${source.path}: ${m.config.architecture}, weights ${m.runner.weights.format}, ${m.config.numLayers} layers, KV ${m.runner.kvCache.numBlocks} blocks × ${m.runner.kvCache.blockSize}; up to ${spec.numSpeculativeTokens} drafts a step`);
    return proposer;
  } catch (e) {
    m.runner.dispose();
    throw e;
  }
}

async function loadOnGpu(rt: Runtime, gpu: GpuDevice, source: ModelSource, options: LoadModelOptions, seconds: () => string): Promise<CommandModel> {
  try {
    const m = await loadGpuModel(rt, gpu, source, options, { ownDevice: true });
    const r = m.runner;
    say(`loaded ${source.path}: ${m.config.architecture}, on ${gpu.describe()}; weights ${r.weightFormat} (${formatBytes(r.weightBytes)} on the GPU), KV ${r.kvDtype} ${r.kvCache.numBlocks} blocks × ${r.kvCache.blockSize}, max ${r.maxModelLen} tokens (${seconds()})`);
    return m;
  } catch (e) {
    gpu.destroy();
    throw e;
  }
}

/** The stderr line on speculative decoding's acceptance ("" without it). */
function describeAcceptance(sd: SpecCounts | null): string {
  if (sd === null) return "";
  const rate = sd.numDraftTokens === 0 ? 0 : sd.numAcceptedTokens / sd.numDraftTokens;
  return ` · speculative: ${sd.numAcceptedTokens} of ${sd.numDraftTokens} drafts accepted (${(100 * rate).toFixed(1)} %)`;
}

function loadOnCpu(rt: Runtime, source: ModelSource, options: LoadModelOptions, seconds: () => string): CommandModel {
  const m = loadModel(rt, source, options);
  const r = m.runner;
  say(`loaded ${source.path}: ${m.config.architecture}, weights ${r.weights.format}, KV ${r.cache.dtype} ${r.kvCache.numBlocks} blocks × ${r.kvCache.blockSize}, max ${r.maxModelLen} tokens, ${rt.threads} threads, ${describeKernels(rt.kernels, rt.int8Dot, rt.int8DotLowering)} (${seconds()}); ${describePlacement(m.plan.placement)}`);
  return m;
}

export async function generateCommand(argv: readonly string[]): Promise<number> {
  const args = parseGenerateArgs(argv);
  return withModel(args, async (model, rt, load) => {
    const proposer = await loadDraft(args, load, model, rt);
    try {
      return await generateWith(args, model, rt, proposer);
    } finally {
      proposer?.runner.dispose();
    }
  });
}

type SpecCounts = { numDraftTokens: number; numAcceptedTokens: number };

async function generateWith(args: ReturnType<typeof parseGenerateArgs>, model: CommandModel, rt: Runtime, proposer: DraftModelProposer | null): Promise<number> {
  let stats: SpecCounts | null = null;
  const { tokenizer } = model;
  const promptIds = args.chat
    ? tokenizer.encodeChat([...(args.system === undefined ? [] : [{ role: "system", content: args.system }]), { role: "user", content: args.prompt }])
    : tokenizer.encode(args.prompt);
  const defaults = { maxTokens: DEFAULT_MAX_TOKENS, ...samplingDefaults(model.generation) };
  const params = resolveSamplingParams({ ...args.sampling, ...(args.json ? { logprobs: 0 } : {}) }, model.config.vocabSize, defaults);
  const result = await generate({
    runner: model.runner,
    tokenizer,
    promptIds,
    params,
    eosTokenIds: model.eosTokenIds,
    runtime: rt,
    ...(args.json ? {} : { onText: (delta: string) => process.stdout.write(delta) }),
    ...(args.speculativeConfig === undefined ? {} : { speculativeConfig: args.speculativeConfig }),
    ...(proposer === null ? {} : { proposer }),
    onSpecDecode: (s) => (stats = s),
  });
  if (args.json) {
    process.stdout.write(`${JSON.stringify({ ids: result.ids, text: result.text, logprobs: result.logprobs, finish_reason: result.finishReason })}\n`);
  } else {
    process.stdout.write("\n");
  }
  const { prefill, decode } = result;
  say(
    `prefill: ${prefill.tokens} tokens in ${prefill.ms.toFixed(1)} ms (${prefill.tokPerS.toFixed(1)} tok/s) · ` +
      `decode: ${decode.tokens} tokens in ${decode.ms.toFixed(1)} ms (${decode.tokPerS.toFixed(1)} tok/s) · finish: ${result.finishReason}${describeAcceptance(stats)}`,
  );
  return 0;
}

export async function logitsCommand(argv: readonly string[]): Promise<number> {
  const args = parseLogitsArgs(argv);
  return withModel(args, async (model) => {
    const ids = args.ids ?? model.tokenizer.encode(args.prompt!);
    const logits = await promptLogits(model.runner, ids);
    if (args.json) {
      process.stdout.write(`${JSON.stringify({ ids, logits: Array.from(logits) })}\n`);
    } else {
      for (const id of topN(logits, args.top)) {
        process.stdout.write(`${String(id).padStart(8)}  ${logits[id]!.toFixed(4).padStart(10)}  ${JSON.stringify(model.tokenizer.idToToken(id) ?? "")}\n`);
      }
    }
    return 0;
  });
}

/**
 * `kvflash generate` and `kvflash logits` arguments. `--flag value` and
 * `--flag=value` both work; sampling flags have vLLM's names. Parsing only:
 * cli/generate-command.ts hands the result to the library.
 */
import { ArgumentError } from "../errors.js";
import { walkFlags } from "./flags.js";
import { type SamplingParams, resolveSamplingParams } from "../engine/sampling-params.js";
import { type LoadFlags, readLoadFlag } from "./load-flags.js";
import { LOAD_DEFAULTS } from "../model/load-settings.js";
import { MAX_BLOCK_SIZE } from "../kv/paged-kv-cache.js";

const MODEL_FLAGS = `  --model MODEL                a model directory, a .gguf file, or a Hugging Face repo: org/name, org/name:Q4_K_M,
                               org/name/file.gguf (from the HF cache, else downloaded into it; default: the embedded model)
  --revision REV               with a hub --model: branch, tag or commit hash (default main)
  --weights FORMAT             compute format of the weights: f32 | bf16 | q8 | q4 | auto (default ${LOAD_DEFAULTS.weights}: the checkpoint's)
  --kv-dtype DTYPE             KV cache: f32 | f16 | bf16 | int8 | fp8 (= fp8_e4m3) | fp8_e5m2 | auto (default ${LOAD_DEFAULTS.kvDtype})
  --max-model-len N            cap on prompt + output tokens (default: the model's, as far as the KV cache holds; at most the model's)
  --kv-cache-gib N             KV cache budget, GiB (default: what one sequence of max-model-len needs, within 4 GiB)
  --num-gpu-blocks-override N  exactly N KV blocks (vLLM's name; instead of --kv-cache-gib)
  --block-size N               tokens per KV block, 1..${MAX_BLOCK_SIZE} (default ${LOAD_DEFAULTS.blockSize})
  --threads N                  kernel threads (default: $KVFLASH_THREADS or all cores)
  --device DEVICE              cpu | webgpu | auto: the wasm kernels, a WebGPU adapter (the optional "webgpu"
                               package), or a real GPU when there is one, else the CPU (default ${LOAD_DEFAULTS.device})
  --kernels FLAVOR             baseline | relaxed wasm kernels (default: $KVFLASH_KERNELS, else relaxed where Node runs them right)`;

const SPECULATIVE_FLAG = `  --speculative-config JSON    speculative decoding (vLLM's flag, as kvflash serve): '{"method": "ngram",
                               "num_speculative_tokens": 4, "prompt_lookup_max": 4}', or a draft model with the same
                               tokenizer (loaded on the CPU beside the target), '{"model": DIR_OR_SPEC, "num_speculative_tokens": 4}'`;

export const GENERATE_USAGE = `usage: kvflash generate --prompt TEXT [options]

  Streams the completion of TEXT to stdout; prefill and decode speed go to stderr.

  --prompt TEXT                the prompt (required)
  --chat                       wrap the prompt in the model's chat template as a user message
  --system TEXT                with --chat: a system message first
  --max-tokens N               most tokens to generate (default: generation_config's max_new_tokens, else 128)
  --temperature T              0 = greedy (default: generation_config's, else 1)
  --top-p P  --top-k K  --min-p P
  --repetition-penalty R  --presence-penalty P  --frequency-penalty F
  --seed N                     seed of the sampler's random stream (same seed, same output)
  --stop TEXT                  stop string (repeatable); cut from the output
  --ignore-eos                 keep going past the model's end-of-sequence tokens
  --json                       print { "ids", "text", "logprobs", "finish_reason" } instead of streaming
${SPECULATIVE_FLAG}
${MODEL_FLAGS}
`;

export const LOGITS_USAGE = `usage: kvflash logits (--ids 1,2,3 | --prompt TEXT) [options]

  Runs the prompt through the model and prints the logits of its last position.

  --ids LIST                   comma-separated token ids
  --prompt TEXT                or text, tokenized as the model's tokenizer does (special tokens added)
  --json                       print { "ids", "logits" } (every logit) instead of the top tokens
  --top N                      without --json: how many of the highest logits to list (default 10)
${MODEL_FLAGS}
`;

/** The shared model and load flags (load-flags.ts). */
export type ModelArgs = LoadFlags;

export interface GenerateArgs extends ModelArgs {
  prompt: string;
  chat: boolean;
  system?: string;
  json: boolean;
  /** Only the flags given; the model's generation_config fills the rest. */
  sampling: SamplingParams;
}

export interface LogitsArgs extends ModelArgs {
  ids?: number[];
  prompt?: string;
  json: boolean;
  top: number;
}

/** The flag each sampling field comes from, so an error names what the user typed. */
const SAMPLING_FLAGS: Readonly<Partial<Record<keyof SamplingParams, string>>> = {
  maxTokens: "--max-tokens",
  temperature: "--temperature",
  topP: "--top-p",
  topK: "--top-k",
  minP: "--min-p",
  repetitionPenalty: "--repetition-penalty",
  presencePenalty: "--presence-penalty",
  frequencyPenalty: "--frequency-penalty",
  seed: "--seed",
};

/**
 * Checks the sampling flags' ranges before any model loads (resolveSamplingParams'
 * rules; the flags set no token ids, so no vocabulary is needed), naming the flag:
 * `--top-p must be ≤ 1, got 2`.
 */
function checkSamplingFlags(sampling: SamplingParams): void {
  try {
    resolveSamplingParams(sampling, 1);
  } catch (e) {
    const flag = !(e instanceof ArgumentError) ? undefined : e.argument.startsWith("stop[") ? "--stop" : SAMPLING_FLAGS[e.argument as keyof SamplingParams];
    if (flag === undefined) throw e;
    throw new ArgumentError(flag, (e as ArgumentError).message.slice((e as ArgumentError).argument.length + 1));
  }
}

export function parseGenerateArgs(argv: readonly string[]): GenerateArgs {
  const args: Partial<GenerateArgs> & { sampling: SamplingParams } = { chat: false, json: false, sampling: {} };
  const s = args.sampling;
  const stops: string[] = [];
  walkFlags(argv, { usage: GENERATE_USAGE, what: "an option of this command", switches: ["--chat", "--json", "--ignore-eos"] }, (flag, read) => {
    switch (flag) {
      case "--prompt":
        args.prompt = read.string();
        return true;
      case "--chat":
        args.chat = true;
        return true;
      case "--system":
        args.system = read.string();
        return true;
      case "--json":
        args.json = true;
        return true;
      case "--max-tokens":
        s.maxTokens = read.integer(1);
        return true;
      case "--temperature":
        s.temperature = read.number();
        return true;
      case "--top-p":
        s.topP = read.number();
        return true;
      case "--top-k":
        s.topK = read.integer(-1);
        return true;
      case "--min-p":
        s.minP = read.number();
        return true;
      case "--repetition-penalty":
        s.repetitionPenalty = read.number();
        return true;
      case "--presence-penalty":
        s.presencePenalty = read.number();
        return true;
      case "--frequency-penalty":
        s.frequencyPenalty = read.number();
        return true;
      case "--seed":
        s.seed = read.integer(0);
        return true;
      case "--stop":
        stops.push(read.string());
        return true;
      case "--ignore-eos":
        s.ignoreEos = true;
        return true;
      default:
        return readLoadFlag(args, flag, read);
    }
  });
  if (stops.length > 0) s.stop = stops;
  if (args.prompt === undefined) throw new ArgumentError("--prompt", `is required\n${GENERATE_USAGE}`);
  if (args.system !== undefined && !args.chat) throw new ArgumentError("--system", "needs --chat (it is a chat message)");
  checkSamplingFlags(s);
  return args as GenerateArgs;
}

export function parseLogitsArgs(argv: readonly string[]): LogitsArgs {
  const args: LogitsArgs = { json: false, top: 10 };
  walkFlags(argv, { usage: LOGITS_USAGE, what: "an option of this command", switches: ["--json"] }, (flag, read) => {
    switch (flag) {
      case "--ids": {
        const v = read.string();
        args.ids = v.split(",").map((part, i) => {
          const t = part.trim();
          if (!/^\d+$/.test(t)) throw new ArgumentError(`--ids[${i}]`, `must be a token id (an integer ≥ 0), got ${JSON.stringify(part)}`);
          return Number(t);
        });
        return true;
      }
      case "--prompt":
        args.prompt = read.string();
        return true;
      case "--json":
        args.json = true;
        return true;
      case "--top":
        args.top = read.integer(1);
        return true;
      default:
        return readLoadFlag(args, flag, read);
    }
  });
  if (args.speculativeConfig !== undefined) throw new ArgumentError("--speculative-config", "is a generation setting: logits runs no decoding steps");
  if ((args.ids === undefined) === (args.prompt === undefined)) throw new ArgumentError("--ids", `or --prompt is required (one of them)\n${LOGITS_USAGE}`);
  return args;
}

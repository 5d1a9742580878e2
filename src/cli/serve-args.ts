/**
 * `kvflash serve` arguments, with vLLM's flag names where vLLM has the flag.
 * `--flag value` and `--flag=value` both work. Parsing only: serve() does the rest.
 */
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { ArgumentError } from "../errors.js";
import { walkFlags } from "./flags.js";
import { type LoadFlags, readLoadFlag } from "./load-flags.js";
import { SERVE_TASKS, type ServeOptions } from "../server/start-server.js";
import { checkOneOf } from "../tensor/check.js";
import { parsePoolerConfig } from "../model/pooler-config.js";
import { DEFAULT_MAX_NUM_SEQS, MIN_DEFAULT_BATCHED_TOKENS } from "../engine/engine-config.js";
import { MAX_BLOCK_SIZE } from "../kv/paged-kv-cache.js";
import { LOAD_DEFAULTS } from "../model/load-settings.js";
import { MAX_DATA_PARALLEL_SIZE } from "../engine/data-parallel-engine.js";
import { TOOL_PARSERS, type ToolParserName } from "../server/tool-parsers.js";
import { DEFAULT_LOG_STATS_INTERVAL_S } from "../server/stats-log.js";
import { DEFAULT_DISABLE_BY_BATCH_SIZE } from "../engine/speculative-config.js";

export const SERVE_USAGE = `usage: kvflash serve [options]

  --model MODEL                a model directory, a .gguf file, or a Hugging Face repo: org/name, org/name:Q4_K_M,
                               org/name/file.gguf (from the HF cache, else downloaded into it; see kvflash pull)
                               (default: the embedded default model)
  --revision REV               with a hub --model: branch, tag or commit hash (default main)
  --host HOST                  address to bind (default 127.0.0.1; 0.0.0.0 for every interface)
  --port N                     default 8000
  --served-model-name NAME…    names clients use in "model" (default: the --model argument)
  --task TASK                  auto | generate | embed | score: embed serves a decoder's last-token embeddings on
                               /v1/embeddings (vLLM's pooling runner); score a decoder's yes/no logits on /v1/rerank
                               and /v1/score (Qwen3-Reranker); default auto: embed for an encoder, a cross-encoder or
                               a sentence-transformers directory (modules.json), else generate
  --pooler-config JSON         how --task embed pools a decoder (vLLM's flag; also --override-pooler-config), e.g.
                               '{"pooling_type": "MEAN", "normalize": true}': MEAN | CLS | LAST (default: the
                               directory's sentence-transformers Pooling, else LAST, normalized)
  --api-key KEY                require "Authorization: Bearer KEY" on /v1 and /tokenize (or $KVFLASH_API_KEY)
  --cors-origin ORIGIN         send Access-Control-Allow-Origin: ORIGIN (default: no CORS)
  --tool-call-parser NAME      hermes | llama3_json | mistral | qwen3_coder | generic (default: the one the chat
                               template is written for; generic: tools in the system prompt)
  --kv-cache-gib N             KV cache budget, GiB (default 4, at most half the memory left after the weights;
                               never more than max-num-seqs sequences of max-model-len need)
  --kv-dtype DTYPE             KV cache storage: f32 | f16 | bf16 | int8 | fp8 (= fp8_e4m3) | fp8_e5m2 | auto (default ${LOAD_DEFAULTS.kvDtype})
  --weights FORMAT             compute format of the weights: f32 | bf16 | q8 | q4 | auto (default ${LOAD_DEFAULTS.weights}: the checkpoint's)
  --device DEVICE              cpu | webgpu | auto: the wasm kernels, a WebGPU adapter (the optional "webgpu"
                               package), or a real GPU when there is one, else the CPU (default ${LOAD_DEFAULTS.device})
  --kernels FLAVOR             baseline | relaxed wasm kernels (default: $KVFLASH_KERNELS, else relaxed where Node runs them right)
  --num-gpu-blocks-override N  exactly N KV blocks (vLLM's name; instead of --kv-cache-gib)
  --block-size N               tokens per KV block, 1..${MAX_BLOCK_SIZE} (default ${LOAD_DEFAULTS.blockSize})
  --max-model-len N            cap on prompt + output tokens (default: the model's, as far as the KV cache holds; at most the model's)
  --max-num-seqs N             most requests running at once (default ${DEFAULT_MAX_NUM_SEQS})
  --max-num-batched-tokens N   token budget of one engine step (default max(${MIN_DEFAULT_BATCHED_TOKENS}, --max-num-seqs))
  --max-waiting-requests N     waiting queue bound, in client requests (a prompt list is one); beyond it 429 (default 1024)
  --no-enable-prefix-caching   turn automatic prefix caching off
  --speculative-config JSON    speculative decoding (vLLM's flag): prompt lookup, e.g. '{"method": "ngram",
                               "num_speculative_tokens": 4, "prompt_lookup_max": 4, "prompt_lookup_min": 2}', or a
                               draft model with the same tokenizer, '{"model": DIR_OR_SPEC, "num_speculative_tokens": 4}';
                               off while disable_by_batch_size (default ${DEFAULT_DISABLE_BY_BATCH_SIZE}) or more requests run
  --threads N                  kernel threads, of each engine (default: $KVFLASH_THREADS or all cores, shared out among the engines)
  --data-parallel-size N       N engines behind one HTTP front, each with its own threads and KV cache; requests go
                               by prompt-prefix affinity (default 1; vLLM's flag)
  --shutdown-timeout S         on SIGTERM, let in-flight requests finish for up to S seconds (default 10)
  --disable-log-requests       no log line per request (by default: id, route, status, tokens, time to first token, total time)
  --disable-log-stats          no throughput line every $KVFLASH_LOG_STATS_INTERVAL seconds (default ${DEFAULT_LOG_STATS_INTERVAL_S}) while there is load
  --loader MODULE              model loader module, a path or URL exporting loadEngineModel (default: the decoder)
  --loader-options JSON        options for a custom loader
`;

export interface ServeArgs extends Omit<ServeOptions, "source" | "modelDir" | "speculativeConfig">, LoadFlags {
  /** Seconds SIGTERM waits for in-flight requests. */
  shutdownTimeoutS: number;
  /** One log line per request (off with --disable-log-requests). */
  logRequests: boolean;
  /** Seconds between throughput lines ($KVFLASH_LOG_STATS_INTERVAL), or null with --disable-log-stats. */
  logStatsIntervalS: number | null;
}

export function parseServeArgs(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): ServeArgs {
  const args: ServeArgs = { shutdownTimeoutS: 10, maxWaitingRequests: 1024, logRequests: true, logStatsIntervalS: DEFAULT_LOG_STATS_INTERVAL_S };
  const key = env["KVFLASH_API_KEY"];
  if (key !== undefined && key !== "") args.apiKey = key;
  const interval = env["KVFLASH_LOG_STATS_INTERVAL"];
  if (interval !== undefined && interval.trim() !== "") {
    args.logStatsIntervalS = Number(interval);
    if (!(args.logStatsIntervalS > 0)) throw new ArgumentError("KVFLASH_LOG_STATS_INTERVAL", `must be a number of seconds > 0, got ${JSON.stringify(interval)}`);
  }
  const switches = ["--enable-prefix-caching", "--no-enable-prefix-caching", "--disable-log-requests", "--disable-log-stats"];
  walkFlags(argv, { usage: SERVE_USAGE, what: "a serve option", switches }, (flag, read) => {
    switch (flag) {
      case "--host":
        args.host = read.string();
        break;
      case "--port":
        args.port = read.integer(0);
        if (args.port > 65535) throw new ArgumentError(flag, `must be ≤ 65535, got ${args.port}`);
        break;
      case "--served-model-name": {
        args.servedModelNames = [read.string(), ...read.more()];
        break;
      }
      case "--api-key":
        args.apiKey = read.string();
        break;
      case "--task":
        args.task = checkOneOf(flag, read.string(), SERVE_TASKS);
        break;
      case "--cors-origin":
        args.corsOrigin = read.string();
        break;
      case "--tool-call-parser": {
        const name = read.string();
        if (!(TOOL_PARSERS as readonly string[]).includes(name)) throw new ArgumentError("--tool-call-parser", `must be one of ${TOOL_PARSERS.join(", ")}, got ${JSON.stringify(name)}`);
        args.toolCallParser = name as ToolParserName;
        break;
      }
      case "--max-num-seqs":
        args.maxNumSeqs = read.integer(1);
        break;
      case "--max-num-batched-tokens":
        args.maxNumBatchedTokens = read.integer(1);
        break;
      case "--max-waiting-requests":
        args.maxWaitingRequests = read.integer(0);
        break;
      case "--enable-prefix-caching":
        args.enablePrefixCaching = true;
        break;
      case "--no-enable-prefix-caching":
        args.enablePrefixCaching = false;
        break;
      case "--disable-log-requests":
        args.logRequests = false;
        break;
      case "--disable-log-stats":
        args.logStatsIntervalS = null;
        break;
      case "--loader": {
        const v = read.string();
        args.loader = /^[a-z]+:/i.test(v) ? v : pathToFileURL(resolve(v)).href;
        break;
      }
      case "--pooler-config":
      case "--override-pooler-config": {
        const v = read.string();
        let json: unknown;
        try {
          json = JSON.parse(v);
        } catch (e) {
          throw new ArgumentError(flag, `must be a JSON object, got ${JSON.stringify(v)}: ${(e as Error).message}`);
        }
        args.poolerConfig = parsePoolerConfig(json, flag);
        break;
      }
      case "--loader-options": {
        const v = read.string();
        try {
          args.loaderExtra = JSON.parse(v) as Record<string, unknown>;
        } catch (e) {
          throw new ArgumentError(flag, `must be a JSON object, got ${JSON.stringify(v)}: ${(e as Error).message}`);
        }
        break;
      }
      case "--data-parallel-size":
        args.dataParallelSize = read.integer(1);
        if (args.dataParallelSize > MAX_DATA_PARALLEL_SIZE) throw new ArgumentError(flag, `must be an integer in [1, ${MAX_DATA_PARALLEL_SIZE}], got ${args.dataParallelSize}`);
        break;
      case "--shutdown-timeout":
        args.shutdownTimeoutS = read.number();
        if (args.shutdownTimeoutS < 0) throw new ArgumentError(flag, `must be a number ≥ 0, got ${args.shutdownTimeoutS}`);
        break;
      default:
        return readLoadFlag(args, flag, read);
    }
    return true;
  });
  return args;
}

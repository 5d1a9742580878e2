/**
 * `kvflash serve` arguments, with vLLM's flag names where vLLM has the flag.
 * `--flag value` and `--flag=value` both work. Parsing only: serve() does the rest.
 */
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { ArgumentError } from "../errors.js";
import type { ServeOptions } from "../server/serve.js";

export const SERVE_USAGE = `usage: kvflash serve [options]

  --model DIR                  Hugging Face model directory (default: the embedded default model)
  --host HOST                  address to bind (default 127.0.0.1; 0.0.0.0 for every interface)
  --port N                     default 8000
  --served-model-name NAME…    names clients use in "model" (default: the --model argument)
  --api-key KEY                require "Authorization: Bearer KEY" on /v1 and /tokenize (or $KVFLASH_API_KEY)
  --cors-origin ORIGIN         send Access-Control-Allow-Origin: ORIGIN (default: no CORS)
  --kv-cache-gib N             memory for the paged KV cache, GiB
  --kv-dtype DTYPE             KV cache storage: f32 | f16 | bf16 | int8 | fp8_e4m3 | fp8_e5m2
  --weights FORMAT             compute format of the weights: f32 | bf16 | q8 | q4
  --num-gpu-blocks-override N  exactly N KV blocks (vLLM's name; wins over --kv-cache-gib)
  --block-size N               tokens per KV block
  --max-model-len N            cap on prompt + output tokens
  --max-num-seqs N             most requests running at once (default 64)
  --max-num-batched-tokens N   token budget of one engine step (default 512)
  --max-waiting-requests N     waiting queue bound; beyond it requests get 429 (default 1024)
  --no-enable-prefix-caching   turn automatic prefix caching off
  --threads N                  kernel threads (default: $KVFLASH_THREADS or all cores)
  --shutdown-timeout S         on SIGTERM, let in-flight requests finish for up to S seconds (default 10)
  --loader MODULE              model loader module, a path or URL exporting loadEngineModel (default: the decoder)
  --loader-options JSON        options for a custom loader
`;

export interface ServeArgs extends ServeOptions {
  /** Seconds SIGTERM waits for in-flight requests. */
  shutdownTimeoutS: number;
}

export function parseServeArgs(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): ServeArgs {
  const args: ServeArgs = { shutdownTimeoutS: 10, maxWaitingRequests: 1024 };
  const key = env["KVFLASH_API_KEY"];
  if (key !== undefined && key !== "") args.apiKey = key;
  for (let i = 0; i < argv.length; i++) {
    let flag = argv[i]!;
    let inline: string | undefined;
    const eq = flag.indexOf("=");
    if (flag.startsWith("--") && eq > 0) {
      inline = flag.slice(eq + 1);
      flag = flag.slice(0, eq);
    }
    const value = (): string => {
      const v = inline ?? argv[++i];
      if (v === undefined || (inline === undefined && v.startsWith("--"))) throw new ArgumentError(flag, "needs a value");
      return v;
    };
    const int = (min: number): number => {
      const v = value();
      const n = Number(v);
      if (!Number.isSafeInteger(n) || n < min) throw new ArgumentError(flag, `must be an integer ≥ ${min}, got ${JSON.stringify(v)}`);
      return n;
    };
    const positive = (): number => {
      const v = value();
      const n = Number(v);
      if (!Number.isFinite(n) || n <= 0) throw new ArgumentError(flag, `must be a number > 0, got ${JSON.stringify(v)}`);
      return n;
    };
    switch (flag) {
      case "--model":
        args.modelDir = value();
        break;
      case "--host":
        args.host = value();
        break;
      case "--port":
        args.port = int(0);
        if (args.port > 65535) throw new ArgumentError(flag, `must be ≤ 65535, got ${args.port}`);
        break;
      case "--served-model-name": {
        const names = [value()];
        while (inline === undefined && i + 1 < argv.length && !argv[i + 1]!.startsWith("--")) names.push(argv[++i]!);
        args.servedModelNames = names;
        break;
      }
      case "--api-key":
        args.apiKey = value();
        break;
      case "--cors-origin":
        args.corsOrigin = value();
        break;
      case "--kv-cache-gib":
        args.kvCacheBytes = Math.floor(positive() * 2 ** 30);
        break;
      case "--kv-dtype":
        args.kvDtype = value();
        break;
      case "--weights":
        args.weights = value();
        break;
      case "--num-gpu-blocks-override":
        args.numBlocks = int(1);
        break;
      case "--block-size":
        args.blockSize = int(1);
        break;
      case "--max-model-len":
        args.maxModelLen = int(2);
        break;
      case "--max-num-seqs":
        args.maxNumSeqs = int(1);
        break;
      case "--max-num-batched-tokens":
        args.maxNumBatchedTokens = int(1);
        break;
      case "--max-waiting-requests":
        args.maxWaitingRequests = int(0);
        break;
      case "--enable-prefix-caching":
        args.enablePrefixCaching = true;
        break;
      case "--no-enable-prefix-caching":
        args.enablePrefixCaching = false;
        break;
      case "--loader": {
        const v = value();
        args.loader = /^[a-z]+:/i.test(v) ? v : pathToFileURL(resolve(v)).href;
        break;
      }
      case "--loader-options": {
        const v = value();
        try {
          args.loaderExtra = JSON.parse(v) as Record<string, unknown>;
        } catch (e) {
          throw new ArgumentError(flag, `must be a JSON object, got ${JSON.stringify(v)}: ${(e as Error).message}`);
        }
        break;
      }
      case "--threads":
        args.threads = int(1);
        break;
      case "--shutdown-timeout":
        args.shutdownTimeoutS = Number(value());
        if (!(args.shutdownTimeoutS >= 0)) throw new ArgumentError(flag, `must be a number ≥ 0, got ${argv[i]}`);
        break;
      default:
        throw new ArgumentError(flag, `is not a serve option\n${SERVE_USAGE}`);
    }
  }
  return args;
}

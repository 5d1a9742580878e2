/**
 * `kvflash serve`: start the server, report load progress and readiness on
 * stderr, and shut down cleanly on SIGTERM / SIGINT (in-flight requests get
 * --shutdown-timeout seconds to finish; a second signal exits at once).
 */
import { ArgumentError } from "../errors.js";
import { formatBytes } from "../runtime/allocator.js";
import { describeKernels } from "../runtime/module.js";
import { defaultModelDir } from "../model/default-model.js";
import type { ModelSource } from "../sources/source.js";
import { serve } from "../server/start-server.js";
import { StatsLogger } from "../server/stats-log.js";
import { resolveModelArg } from "./hub.js";
import { checkModelDirArg } from "./model-dir-arg.js";
import { asFlagError } from "./load-flags.js";
import { type ServeArgs, parseServeArgs } from "./serve-args.js";
import { resolveSpeculativeConfig } from "../engine/speculative-config.js";

export async function serveCommand(argv: readonly string[]): Promise<number> {
  const args = parseServeArgs(argv);
  const log = (line: string): void => void process.stderr.write(`kvflash: ${line}\n`);
  const { model, revision, ...options } = args;
  if (model === undefined && revision !== undefined) throw new ArgumentError("--revision", "needs a hub --model (org/name)");
  // --model becomes a typed source here, once, before the engine worker starts (downloading if need be).
  const source: ModelSource = model === undefined ? { kind: "dir", path: defaultModelDir() } : (await resolveModelArg(model, revision, log)).source;
  checkModelDirArg(source);
  log(`loading ${model === undefined ? "the embedded default model" : source.path}…`);
  const spec = options.speculativeConfig;
  const draftSource = spec?.method === "draft_model" ? (await resolveModelArg(spec.model, undefined, log)).source : undefined;
  if (draftSource !== undefined) checkModelDirArg(draftSource);
  // serve() resolves the load settings (the library's resolver); an error names the flag, as the parser's do.
  const running = await serve({ ...options, source, ...(draftSource === undefined ? {} : { draftSource }), servedModelNames: options.servedModelNames ?? [model ?? "kvflash-default"], requestLog: args.logRequests ? log : null }).catch((e: unknown) => {
    throw asFlagError(e);
  });
  const names = running.server.context.modelNames;
  log(`listening on ${running.url} (model ${names.map((n) => JSON.stringify(n)).join(", ")}; GET /health is 503 until loaded)`);
  log(`chat template: ${running.server.context.tokenizer.chatTemplateOrigin ?? "none"}`);

  const statsLog = args.logStatsIntervalS === null ? null : new StatsLogger({ stats: () => running.engine.stats(), write: log, intervalS: args.logStatsIntervalS });

  let lastDecile = -1;
  const progress = setInterval(() => {
    const s = running.engine.state;
    if (s.state !== "loading" || s.progress === null || s.progress.total === 0) return;
    const decile = Math.floor((10 * s.progress.done) / s.progress.total);
    if (decile > lastDecile && decile < 10) {
      lastDecile = decile;
      log(`loading weights ${decile * 10}% (${formatBytes(s.progress.done)} of ${formatBytes(s.progress.total)})`);
    }
  }, 200);

  let stopping = false;
  const stopped = new Promise<number>((resolveStopped) => {
    const onSignal = (signal: NodeJS.Signals): void => {
      if (stopping) {
        log(`${signal} again: exiting now`);
        process.exit(1);
      }
      stopping = true;
      const inFlight = running.engine.numInFlight;
      log(`${signal}: ${inFlight > 0 ? `draining ${inFlight} request(s) for up to ${args.shutdownTimeoutS} s, then ` : ""}shutting down`);
      running.close(args.shutdownTimeoutS * 1000).then(
        () => resolveStopped(0),
        (e: Error) => {
          log(`shutdown failed: ${e.message}`);
          resolveStopped(1);
        },
      );
    };
    process.on("SIGTERM", onSignal);
    process.on("SIGINT", onSignal);
  });

  try {
    // A signal during the load stops the wait: the engine is shut down and `ready` may never settle.
    const info = await Promise.race([running.ready, stopped.then(() => null)]);
    if (info !== null && info.task === "embed") log(
      `ready in ${info.loadSeconds.toFixed(2)} s: ${info.embedding?.crossEncoder === true ? `a cross-encoder (${info.embedding.architecture}, a reranker)` : `an embedding model, ${info.embedding?.dimensions} dimensions`}, max_model_len ${info.maxModelLen}, ` +
        `max_num_seqs ${info.maxNumSeqs}, ${info.threads} thread(s), ${describeKernels(info.kernels, info.int8Dot, info.int8DotLowering)}. Try:\n${tryHint(running.url, args.apiKey ?? null, info.embedding?.crossEncoder === true ? "rerank" : "embed")}`,
    );
    else if (info !== null) log(
      `ready in ${info.loadSeconds.toFixed(2)} s: max_model_len ${info.maxModelLen}, ${info.numBlocks} KV blocks × ${info.blockSize} tokens, ` +
        `max_num_seqs ${info.maxNumSeqs}, ${info.threads} thread(s), ${describeKernels(info.kernels, info.int8Dot, info.int8DotLowering)}${info.placement === undefined ? "" : `; ${info.placement}`}` +
        `${describeSpeculation(args.speculativeConfig)}. Try:\n${tryHint(running.url, args.apiKey ?? null)}`,
    );
  } catch (e) {
    if (!stopping) {
      log((asFlagError(e) as Error).message);
      clearInterval(progress);
      statsLog?.stop();
      await running.close(0);
      return 1;
    }
  } finally {
    clearInterval(progress);
  }
  const code = await stopped;
  statsLog?.stop();
  log("stopped");
  return code;
}

/**
 * The startup hint: a curl that works against this server. With an API key it
 * sends the Authorization header, reading the key from $KVFLASH_API_KEY so the
 * key itself never lands in the log.
 */
function tryHint(url: string, apiKey: string | null, pooling: "embed" | "rerank" | null = null): string {
  const auth = apiKey === null ? "" : ` -H "Authorization: Bearer $KVFLASH_API_KEY"`;
  const fromFlag = apiKey !== null && process.env["KVFLASH_API_KEY"] !== apiKey;
  if (pooling === "rerank") return `  curl ${url}/v1/rerank -H 'Content-Type: application/json'${auth} -d '{"query": "What is a panda?", "documents": ["The giant panda is a bear.", "Paris is in France."]}'` + (fromFlag ? "\n  (with KVFLASH_API_KEY set to the --api-key value)" : "");
  if (pooling === "embed") return `  curl ${url}/v1/embeddings -H 'Content-Type: application/json'${auth} -d '{"input": ["Hello!"]}'` + (fromFlag ? "\n  (with KVFLASH_API_KEY set to the --api-key value)" : "");
  return (
    `  curl ${url}/v1/chat/completions -H 'Content-Type: application/json'${auth} ` +
    `-d '{"messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 32}'` +
    (fromFlag ? "\n  (with KVFLASH_API_KEY set to the --api-key value)" : "") +
    `\n  or open ${url}/ in a browser`
  );
}

/** The ready line's note on speculative decoding ("" when off). */
function describeSpeculation(c: ServeArgs["speculativeConfig"]): string {
  if (c === undefined) return "";
  const s = resolveSpeculativeConfig(c);
  if (s.method === "draft_model") {
    const sampled = s.draftSampling === "sampled" ? ", sampled for sampling requests (draft_sampling sampled)" : "";
    return `; speculative decoding: draft model ${s.model}, up to ${s.numSpeculativeTokens} drafts${sampled}, off at ${s.disableByBatchSize}+ running`;
  }
  return `; speculative decoding: ngram, up to ${s.numSpeculativeTokens} drafts, lookup ${s.promptLookupMin}..${s.promptLookupMax} tokens, off at ${s.disableByBatchSize}+ running`;
}

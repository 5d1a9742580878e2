/**
 * LLM: the library's front door (node-llama-cpp's getLlama().loadModel(),
 * vLLM's LLM(model), streamed as the openai client streams):
 *
 *   const llm = await LLM.load("Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M", { onProgress });
 *   const reply = await llm.chat([{ role: "user", content: "Hi" }], { maxTokens: 64 }); // reply.text
 *   for await (const d of llm.stream(messages, { signal })) process.stdout.write(d.text);
 *   const { embeddings } = await llm.embed(["a query", "a passage"]);   // an embedding model (a sentence-transformers directory)
 *   const { results } = await llm.rerank("a query", ["a passage", "another"]);   // a reranker (or an embedding model's cosine)
 *   await llm.close();
 *
 * How: LLM.load resolves the model as the CLI does (resolveModelSource: a
 * directory, a .gguf, org/name[:QUANT], or the embedded default model), then
 * starts the server (`serve()`) privately on 127.0.0.1, port 0, with a
 * random API key, and every call is a request to it with fetch (SSE for
 * stream). Chosen over calling the route handlers in-process because those
 * take Node's IncomingMessage/ServerResponse (client disconnect, SSE and
 * error mapping live on them), so a socketless path would mean faking both
 * or refactoring the routes, which other work is changing now. Over the
 * loopback socket the library runs the server's exact request path: the
 * same validation (a bad option is the server's 400, thrown as an LLMError
 * with its status/type/param/code), the same OpenAI shapes, the same engine
 * worker (the model runs off this thread; concurrent calls are batched by
 * its continuous-batching steps), and an AbortSignal is the client
 * disconnect the server already handles (the engine frees the request).
 * The cost is a JSON encode/decode per request and per streamed chunk.
 */
import { randomBytes } from "node:crypto";
import { ArgumentError, show } from "../errors.js";
import type { EngineInfo } from "../engine/protocol.js";
import { type ModelSource, resolveModelSource } from "../sources/source.js";
import { type RunningServer, type ServeOptions, serve } from "../server/start-server.js";
import { LLMError } from "./llm-error.js";
import { chatBody, completeBody } from "./request-body.js";
import { sseEvents } from "./sse-events.js";
import type { ChatCompletion, ChatCompletionChunk, ChatDelta, ChatMessage, ChatOptions, ChatResult, CompleteOptions, CompleteResult, Completion, EmbedOptions, EmbedResult, LoadProgressEvent, RerankOptions, RerankResult } from "./types.js";

/** LLM.load's options: the load settings (weights, KV cache, maxModelLen, device, threads, kernels: resolved by serve()'s one resolver) and engine settings serve() takes, and progress. */
export interface LoadOptions extends Omit<ServeOptions, "source" | "modelDir" | "host" | "port" | "apiKey" | "corsOrigin" | "servedModelNames"> {
  /** Download progress (hub models not yet in the cache), then the engine's weight loading; bytes. */
  onProgress?: (event: LoadProgressEvent) => void;
  /** Branch, tag or commit of a hub model. Default "main". */
  revision?: string;
}

/** How often LLM.load looks at the engine's load progress, in ms. */
const LOAD_POLL_MS = 20;

export class LLM {
  /** The model name responses report (the spec given to load, or "kvflash-default"). */
  readonly model: string;
  /** The loaded engine: max_model_len, KV blocks, threads, kernels. */
  readonly info: EngineInfo;
  readonly #running: RunningServer;
  readonly #auth: string;
  #closed: Promise<void> | null = null;

  private constructor(running: RunningServer, apiKey: string, model: string, info: EngineInfo) {
    this.#running = running;
    this.#auth = `Bearer ${apiKey}`;
    this.model = model;
    this.info = info;
  }

  /**
   * Loads a model: a model directory, a .gguf file, a Hugging Face spec
   * (org/name, org/name:Q4_K_M, org/name/file.gguf; from the cache or
   * downloaded, per HF_ENDPOINT / HF_HUB_CACHE / HF_TOKEN / HF_HUB_OFFLINE),
   * or the embedded default model when `model` is left out (`LLM.load()`,
   * `LLM.load({ onProgress })`). Resolves once the engine worker has loaded it.
   */
  static async load(model?: string | LoadOptions, options: LoadOptions = {}): Promise<LLM> {
    if (typeof model === "object" && model !== null) return LLM.load(undefined, model);
    if (model !== undefined && typeof model !== "string") throw new ArgumentError("model", `must be a directory, a .gguf file or org/name, got ${show(model)}`);
    const { onProgress, revision, ...settings } = options;
    let source: ModelSource | undefined;
    if (model !== undefined) {
      const resolved = await resolveModelSource(model, {
        ...(revision === undefined ? {} : { revision }),
        progress: { enabled: false, onUpdate: (done, total) => onProgress?.({ phase: "download", done, total }) },
      }).catch((e: unknown) => {
        // The CLI's wording names its flag; here the argument is `model`.
        throw e instanceof ArgumentError && e.argument === "--model" ? new ArgumentError("model", e.message.slice("--model ".length)) : e;
      });
      if (resolved.from === "local" && revision !== undefined) throw new ArgumentError("options.revision", `applies to hub models, but ${JSON.stringify(model)} is a local path`);
      source = resolved.source;
    } else if (revision !== undefined) {
      throw new ArgumentError("options.revision", "needs a hub model (org/name)");
    }
    const name = model ?? "kvflash-default";
    const apiKey = randomBytes(24).toString("base64url");
    const running = await serve({ ...settings, ...(source === undefined ? {} : { source }), servedModelNames: [name], host: "127.0.0.1", port: 0, apiKey });
    let info: EngineInfo;
    try {
      info = await watchLoad(running, onProgress);
    } catch (e) {
      await running.close(0);
      throw e;
    }
    return new LLM(running, apiKey, name, info);
  }

  /** Requests running or waiting in the engine. */
  get numInFlight(): number {
    return this.#running.engine.numInFlight;
  }

  /** A chat completion (POST /v1/chat/completions): the server's body, `text` (choice 0), and `parsed` for JSON output. */
  async chat(messages: readonly ChatMessage[], options: ChatOptions = {}): Promise<ChatResult> {
    const res = await this.#post("/v1/chat/completions", chatBody(messages, options, false), options.signal);
    const body = (await res.json()) as ChatCompletion;
    const choice = body.choices[0];
    const text = choice?.message.content ?? "";
    const format = options.responseFormat?.type;
    if (format !== "json_schema" && format !== "json_object") return { ...body, text };
    return { ...body, text, parsed: parseJson(text) };
  }

  /**
   * A streamed chat completion: each server chunk with its new content as
   * `text`; the texts concatenate to chat()'s. Breaking out of the loop or
   * aborting `signal` cancels the request.
   */
  async *stream(messages: readonly ChatMessage[], options: ChatOptions = {}): AsyncGenerator<ChatDelta> {
    const res = await this.#post("/v1/chat/completions", chatBody(messages, options, true), options.signal);
    for await (const event of sseEvents(res.body!)) {
      options.signal?.throwIfAborted(); // chunks already received are not handed out after an abort
      const chunk = event as ChatCompletionChunk;
      yield { ...chunk, text: chunk.choices[0]?.delta.content ?? "" };
    }
  }

  /** A prompt completion (POST /v1/completions): text, token ids, or a list of either (a choice each). */
  async complete(prompt: string | readonly string[] | readonly number[] | readonly (readonly number[])[], options: CompleteOptions = {}): Promise<CompleteResult> {
    const res = await this.#post("/v1/completions", completeBody(prompt, options), options.signal);
    const body = (await res.json()) as Completion;
    return { ...body, text: body.choices[0]?.text ?? "" };
  }

  /**
   * Embeddings of texts (or token-id lists) on an embedding model (POST
   * /v1/embeddings, fetched as base64): one f32 vector per input, pooled and
   * normalized as the model's sentence-transformers modules say.
   */
  async embed(input: string | readonly string[] | readonly (readonly number[])[], options: EmbedOptions = {}): Promise<EmbedResult> {
    const body = {
      input,
      encoding_format: "base64",
      ...(options.dimensions === undefined ? {} : { dimensions: options.dimensions }),
      ...(options.truncatePromptTokens === undefined ? {} : { truncate_prompt_tokens: options.truncatePromptTokens }),
    };
    const res = await this.#post("/v1/embeddings", body, options.signal);
    const json = (await res.json()) as { model: string; data: { embedding: string }[]; usage: EmbedResult["usage"] };
    return { model: json.model, usage: json.usage, embeddings: json.data.map((d) => decodeF32(d.embedding)) };
  }

  /**
   * Documents ranked against a query (POST /v1/rerank) on a reranker (a
   * cross-encoder such as bge-reranker, or Qwen3-Reranker with task "score")
   * or, by cosine similarity, on an embedding model; best first. The server
   * checks the options (truncatePromptTokens, useActivation) as it checks
   * /v1/rerank's fields: a bad one is an LLMError naming the field.
   */
  async rerank(query: string, documents: readonly string[], options: RerankOptions = {}): Promise<RerankResult> {
    const body = {
      query,
      documents,
      ...(options.topN === undefined ? {} : { top_n: options.topN }),
      ...(options.truncatePromptTokens === undefined ? {} : { truncate_prompt_tokens: options.truncatePromptTokens }),
      ...(options.useActivation === undefined ? {} : { use_activation: options.useActivation }),
    };
    const res = await this.#post("/v1/rerank", body, options.signal);
    return (await res.json()) as RerankResult;
  }

  /** Tokens of a text (with the tokenizer's special tokens) or of chat messages as the chat template renders them (POST /tokenize). */
  async countTokens(input: string | readonly ChatMessage[]): Promise<number> {
    const res = await this.#post("/tokenize", typeof input === "string" ? { prompt: input } : { messages: input });
    return ((await res.json()) as { count: number }).count;
  }

  /** Ends running requests (they fail) and stops the engine worker and tokenizer workers. Idempotent. */
  close(): Promise<void> {
    this.#closed ??= this.#running.close(0);
    return this.#closed;
  }

  async #post(path: string, body: unknown, signal?: AbortSignal): Promise<Response> {
    if (this.#closed !== null) throw new Error("this LLM is closed");
    const res = await fetch(`${this.#running.url}${path}`, {
      method: "POST",
      headers: { authorization: this.#auth, "content-type": "application/json" },
      body: JSON.stringify(body),
      ...(signal === undefined ? {} : { signal }),
    });
    if (!res.ok) throw await LLMError.fromResponse(res);
    return res;
  }
}

/** OpenAI's base64 embedding: little-endian f32 bytes. */
function decodeF32(b64: string): Float32Array {
  const bytes = Buffer.from(b64, "base64");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return Float32Array.from({ length: bytes.length >> 2 }, (_, i) => view.getFloat32(i * 4, true));
}

/** The reply as JSON, or null when it is not whole JSON (cut at maxTokens). */
function parseJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return null;
  }
}

/** Waits for the engine, reporting its weight-loading progress (EngineState.progress) as it changes. */
async function watchLoad(running: RunningServer, onProgress: ((event: LoadProgressEvent) => void) | undefined): Promise<EngineInfo> {
  let last: { done: number; total: number } | null = null;
  const look = (): void => {
    const s = running.engine.state;
    if (s.state !== "loading" || s.progress === null || (last !== null && s.progress.done === last.done)) return;
    last = { done: s.progress.done, total: s.progress.total };
    onProgress?.({ phase: "load", ...last });
  };
  const timer = setInterval(look, LOAD_POLL_MS);
  try {
    const info = await running.ready;
    look();
    const seen = last as { done: number; total: number } | null;
    if (seen !== null && seen.done < seen.total) onProgress?.({ phase: "load", done: seen.total, total: seen.total });
    return info;
  } finally {
    clearInterval(timer);
  }
}

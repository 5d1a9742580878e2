/**
 * A closed-loop load generator for an OpenAI-compatible server (what vLLM's
 * benchmark_serving does with --max-concurrency): `concurrency` clients each
 * send a streaming /v1/completions request, wait for its last chunk, and send
 * the next, until `requests` are done. Prompts are distinct random token ids
 * (no prefix-cache hits); outputs are exactly maxTokens long (ignore_eos).
 *
 * Per request: TTFT = first chunk carrying a token − send; inter-token
 * latencies from `stream_options.continuous_usage_stats` (every chunk carries
 * the running completion_tokens, so a chunk that brings k tokens after a gap
 * of g contributes k samples of g / k). Aggregate tok/s = output tokens / wall
 * time from the first send to the last chunk.
 */
import { Prng } from "../src/ops-entry.js";

export interface LoadOptions {
  /** http://host:port */
  url: string;
  model: string;
  concurrency: number;
  requests: number;
  promptTokens: number;
  maxTokens: number;
  /** Token ids are drawn from [lowToken, highToken). */
  lowToken: number;
  highToken: number;
  seed?: number;
  apiKey?: string;
  /** More request fields (e.g. response_format for constrained decoding). */
  extraBody?: Record<string, unknown>;
  /** These prompts, in order, instead of `requests` random ones of promptTokens (a workload with shared prefixes). */
  prompts?: readonly number[][];
}

export interface RequestTiming {
  ttftMs: number;
  itlMs: number[];
  outputTokens: number;
  e2eMs: number;
}

export interface LoadResult {
  wallS: number;
  outputTokens: number;
  tokS: number;
  requests: RequestTiming[];
}

async function oneRequest(o: LoadOptions, prompt: readonly number[]): Promise<RequestTiming> {
  const start = performance.now();
  const res = await fetch(`${o.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(o.apiKey ? { authorization: `Bearer ${o.apiKey}` } : {}) },
    body: JSON.stringify({
      model: o.model,
      prompt,
      max_tokens: o.maxTokens,
      temperature: 0,
      ignore_eos: true,
      stream: true,
      stream_options: { include_usage: true, continuous_usage_stats: true },
      ...o.extraBody,
    }),
  });
  if (!res.ok || res.body === null) throw new Error(`POST /v1/completions: ${res.status} ${await res.text()}`);
  const decoder = new TextDecoder();
  let buffer = "";
  let tokens = 0;
  let last = start;
  let ttft = NaN;
  const itl: number[] = [];
  for await (const bytes of res.body) {
    buffer += decoder.decode(bytes as Uint8Array, { stream: true });
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (!event.startsWith("data: ") || event === "data: [DONE]") continue;
      const chunk = JSON.parse(event.slice(6)) as { error?: { message: string }; usage?: { completion_tokens: number } | null };
      if (chunk.error) throw new Error(`stream error: ${chunk.error.message}`);
      const now = performance.now();
      const n = chunk.usage?.completion_tokens ?? tokens;
      if (n > tokens) {
        if (tokens === 0) ttft = now - start;
        else for (let k = tokens; k < n; k++) itl.push((now - last) / (n - tokens));
        tokens = n;
        last = now;
      }
    }
  }
  if (tokens !== o.maxTokens) throw new Error(`expected ${o.maxTokens} output tokens, got ${tokens}`);
  return { ttftMs: ttft, itlMs: itl, outputTokens: tokens, e2eMs: last - start };
}

/** The prompts runLoad sends when given none: `requests` distinct random prompts of promptTokens ids in [lowToken, highToken), from `seed` (default 1). */
export function randomPrompts(o: Pick<LoadOptions, "requests" | "promptTokens" | "lowToken" | "highToken" | "seed">): number[][] {
  const rng = new Prng(o.seed ?? 1);
  return Array.from({ length: o.requests }, () => Array.from({ length: o.promptTokens }, () => o.lowToken + rng.nextInt(o.highToken - o.lowToken)));
}

export async function runLoad(o: LoadOptions): Promise<LoadResult> {
  const prompts = o.prompts ?? randomPrompts(o);
  let next = 0;
  const results: RequestTiming[] = [];
  const start = performance.now();
  await Promise.all(
    Array.from({ length: Math.min(o.concurrency, o.requests) }, async () => {
      while (next < prompts.length) results.push(await oneRequest(o, prompts[next++]!));
    }),
  );
  const wallS = (performance.now() - start) / 1000;
  const outputTokens = results.reduce((s, r) => s + r.outputTokens, 0);
  return { wallS, outputTokens, tokS: outputTokens / wallS, requests: results };
}

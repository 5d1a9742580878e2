/**
 * The engine's metrics as Prometheus text (exposition format 0.0.4), with
 * vLLM's names and labels as prometheus_client writes them: counters get the
 * `_total` suffix, histograms `_bucket{le}` (cumulative), `_sum`, `_count`,
 * and every sample carries `model_name`.
 */
import type { EngineMetricsSnapshot, HistogramSnapshot } from "../engine/metrics.js";

export const PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8";

type Labels = Record<string, string>;

const labelText = (labels: Labels): string => {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")}"`);
  return parts.length === 0 ? "" : `{${parts.join(",")}}`;
};

const num = (x: number): string => (Number.isInteger(x) ? `${x}.0` : String(x));

class Exposition {
  readonly lines: string[] = [];

  family(name: string, type: "gauge" | "counter" | "histogram", help: string): void {
    this.lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
  }

  sample(name: string, labels: Labels, value: number): void {
    this.lines.push(`${name}${labelText(labels)} ${num(value)}`);
  }

  gauge(name: string, help: string, labels: Labels, value: number): void {
    this.family(name, "gauge", help);
    this.sample(name, labels, value);
  }

  counter(name: string, help: string, labels: Labels, value: number): void {
    this.family(`${name}_total`, "counter", help);
    this.sample(`${name}_total`, labels, value);
  }

  histogram(name: string, help: string, labels: Labels, h: HistogramSnapshot): void {
    this.family(name, "histogram", help);
    let cumulative = 0;
    h.buckets.forEach((le, i) => {
      cumulative += h.counts[i]!;
      this.sample(`${name}_bucket`, { ...labels, le: num(le) }, cumulative);
    });
    this.sample(`${name}_bucket`, { ...labels, le: "+Inf" }, h.count);
    this.sample(`${name}_sum`, labels, h.sum);
    this.sample(`${name}_count`, labels, h.count);
  }
}

export interface MetricsInput {
  modelName: string;
  /** null while the engine is not running. */
  stats: EngineMetricsSnapshot | null;
  /** Fraction of the model loaded, in [0, 1]. */
  loadProgress: number;
  /** The KV cache's shape once loaded (vllm:cache_config_info), else null. */
  cacheConfig?: { blockSize: number; numBlocks: number } | null;
  /** Unix seconds now (the value of vllm:lora_requests_info). Default Date.now() / 1000. */
  nowSeconds?: number;
}

export function renderMetrics({ modelName, stats, loadProgress, cacheConfig = null, nowSeconds = Date.now() / 1000 }: MetricsInput): string {
  const e = new Exposition();
  const l = { model_name: modelName };
  e.gauge("kvflash:model_loaded", "1 once the model is loaded and the engine runs.", l, stats === null ? 0 : 1);
  e.gauge("kvflash:load_progress", "Fraction of the model's weights loaded.", l, loadProgress);
  if (stats !== null) {
    e.gauge("vllm:num_requests_running", "Number of requests in model execution batches.", l, stats.numRequestsRunning);
    e.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", l, stats.numRequestsWaiting);
    e.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", l, stats.kvCacheUsage);
    e.gauge("kvflash:num_kv_blocks", "KV-cache blocks in the pool.", l, stats.numBlocks);
    e.gauge("kvflash:num_free_kv_blocks", "KV-cache blocks no request holds (cached or not).", l, stats.numFreeBlocks);
    e.counter("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.", l, stats.prefixCacheQueries);
    e.counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", l, stats.prefixCacheHits);
    e.counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.", l, stats.numPreemptions);
    e.counter("vllm:prompt_tokens", "Number of prefill tokens processed.", l, stats.promptTokens);
    e.counter("vllm:generation_tokens", "Number of generation tokens processed.", l, stats.generationTokens);
    e.family("vllm:request_success_total", "counter", "Count of successfully processed requests.");
    for (const [reason, n] of Object.entries(stats.requestSuccess)) e.sample("vllm:request_success_total", { ...l, finished_reason: reason }, n);
    e.counter("kvflash:failed_forwards", "Forwards that threw; their running requests failed and the engine went on.", l, stats.numFailedForwards);
    e.histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", l, stats.timeToFirstToken);
    e.histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", l, stats.interTokenLatency);
    e.histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", l, stats.e2eRequestLatency);
    const sd = stats.specDecode;
    if (sd !== null) {
      e.counter("vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", l, sd.numDrafts);
      e.counter("vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", l, sd.numDraftTokens);
      e.counter("vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", l, sd.numAcceptedTokens);
      e.family("vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter", "Accepted tokens per draft position.");
      sd.acceptedPerPos.forEach((n, i) => e.sample("vllm:spec_decode_num_accepted_tokens_per_pos_total", { ...l, position: String(i) }, n));
    }
    // The Gateway API Inference Extension's model server protocol (docs/proposals/003): the endpoint
    // picker reads the LoRA info gauge (value: the last update's timestamp) and, optionally, the block
    // size and block count from cache_config_info. No adapters are served: empty lists, max_lora 0.
    e.gauge("vllm:lora_requests_info", "Running stats on lora requests.", { running_lora_adapters: "", max_lora: "0", waiting_lora_adapters: "" }, nowSeconds);
    if (cacheConfig !== null) {
      e.gauge("vllm:cache_config_info", "Information of the LLMEngine CacheConfig.", { block_size: String(cacheConfig.blockSize), num_gpu_blocks: String(cacheConfig.numBlocks) }, 1);
    }
  }
  return `${e.lines.join("\n")}\n`;
}

/** Parses Prometheus text into `name{labels}` → value (for tests and the bench). */
export function parseMetrics(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

/**
 * Suite `scale`: one machine's ways to serve more (deploy/README.md), on the
 * 16-tenant workload, in one run. Each tenant has its own system prompt of
 * SYSTEM_TOKENS tokens; every request is its tenant's prompt plus a fresh
 * 16-token question, 32 greedy output tokens (ignore_eos), 16 requests in
 * flight, tenants shuffled round by round. The embedded default model (what
 * `npm start` serves). Configurations:
 *
 *   single           one `kvflash serve --threads 2` process (the baseline: over_single = 1)
 *   haproxy-1        one replica, 1 thread, behind deploy/haproxy/haproxy.cfg
 *   haproxy-2        two replicas, 1 thread each, behind the recipe (prefix affinity)
 *   haproxy-2-rr     the same with `balance roundrobin` (affinity's baseline)
 *   dp-2             `kvflash serve --data-parallel-size 2 --threads 1` (two engines, one front)
 *
 * Rows: tok_s (output tokens over the wall time of the whole workload),
 * over_single (tok_s over the single process's, same run), and
 * prefix_hit_rate (vllm:prefix_cache_hits over queries, summed over replicas).
 */
import { type Row, type Suite, type SuiteContext } from "../harness.js";
import { runLoad } from "../serve-load.js";
import { Prng } from "../../src/ops-entry.js";
import { parseMetrics } from "../../src/server/metrics.js";
import { type Replica, startCluster, startReplica } from "../../src/testing/replicas.js";

const TENANTS = 16;
const SYSTEM_TOKENS = 900;
const QUESTION_TOKENS = 16;
/** The default model's vocabulary is 4096: ids in [LOW, HIGH) avoid its special tokens. */
const LOW = 16;
const HIGH = 4000;

function workload(rounds: number): number[][] {
  const rng = new Prng(7);
  const draw = (n: number): number[] => Array.from({ length: n }, () => LOW + rng.nextInt(HIGH - LOW));
  const systems = Array.from({ length: TENANTS }, () => draw(SYSTEM_TOKENS));
  const prompts: number[][] = [];
  for (let r = 0; r < rounds; r++) {
    const order = Array.from({ length: TENANTS }, (_, t) => t);
    for (let i = order.length - 1; i > 0; i--) {
      const j = rng.nextInt(i + 1);
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    for (const t of order) prompts.push([...systems[t]!, ...draw(QUESTION_TOKENS)]);
  }
  return prompts;
}

async function hitRate(replicas: readonly Replica[]): Promise<number> {
  let hits = 0;
  let queries = 0;
  for (const r of replicas) {
    const m = parseMetrics(await (await fetch(`${r.url}/metrics`)).text());
    for (const [k, v] of m) {
      if (k.startsWith("vllm:prefix_cache_hits_total")) hits += v;
      if (k.startsWith("vllm:prefix_cache_queries_total")) queries += v;
    }
  }
  return queries === 0 ? 0 : hits / queries;
}

interface Setup {
  config: string;
  replicas: number;
  threadsEach: number;
  start(): Promise<{ url: string; replicas: Replica[]; stop(): Promise<void> }>;
}

const direct = (args: string[]) => async () => {
  const r = await startReplica(args);
  return { url: r.url, replicas: [r], stop: async () => void (await r.stop("SIGKILL")) };
};
const proxied = (replicas: 1 | 2, balance?: string) => async () => {
  const c = await startCluster({ replicas, replicaArgs: ["--threads", "1"], ...(balance === undefined ? {} : { balance }) });
  return { url: c.front, replicas: c.replicas, stop: c.stop };
};

const SETUPS: Setup[] = [
  { config: "single", replicas: 1, threadsEach: 2, start: direct(["--threads", "2"]) },
  { config: "haproxy-1", replicas: 1, threadsEach: 1, start: proxied(1) },
  { config: "haproxy-2", replicas: 2, threadsEach: 1, start: proxied(2) },
  { config: "haproxy-2-rr", replicas: 2, threadsEach: 1, start: proxied(2, "roundrobin") },
  { config: "dp-2", replicas: 2, threadsEach: 1, start: direct(["--data-parallel-size", "2", "--threads", "1"]) },
];

export const scale: Suite = {
  name: "scale",
  description: "16 tenants' system prompts over one process, HAProxy replicas (affinity, round robin) and --data-parallel-size 2: tok/s and prefix-cache hit rate",
  async run(ctx: SuiteContext): Promise<Row[]> {
    const rounds = ctx.quick ? 2 : 4;
    const maxTokens = ctx.quick ? 8 : 32;
    const prompts = workload(rounds);
    const rows: Row[] = [];
    let single = NaN;
    for (const s of SETUPS) {
      const running = await s.start();
      try {
        // Warm-up on a prompt no tenant shares: the kernels tier up, the prefix cache stays cold for the tenants.
        await runLoad({ url: running.url, model: "kvflash-default", concurrency: 2, requests: 4, promptTokens: 64, maxTokens, lowToken: LOW, highToken: HIGH, seed: 99 });
        const before = await hitRate(running.replicas);
        const r = await runLoad({ url: running.url, model: "kvflash-default", concurrency: TENANTS, requests: prompts.length, prompts, promptTokens: 0, maxTokens, lowToken: LOW, highToken: HIGH });
        if (s.config === "single") single = r.tokS;
        const rate = await hitRate(running.replicas);
        rows.push({
          config: s.config,
          replicas: s.replicas,
          threads_each: s.threadsEach,
          requests: prompts.length,
          prompt_tokens: SYSTEM_TOKENS + QUESTION_TOKENS,
          output_tokens: maxTokens,
          tok_s: r.tokS,
          over_single: r.tokS / single,
          prefix_hit_rate: rate,
        });
        ctx.log(`scale ${s.config}: ${r.tokS.toFixed(1)} tok/s (${(r.tokS / single).toFixed(2)}× single), prefix hit rate ${rate.toFixed(3)} (warm-up ${before.toFixed(3)})`);
      } finally {
        await running.stop();
      }
    }
    return rows;
  },
};

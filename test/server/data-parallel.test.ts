// `serve({ dataParallelSize: 2 })`, the server behind `kvflash serve --data-parallel-size 2`: two
// engines behind one HTTP front, on the embedded default model. Both engines take work; a tenant's
// repeated system prompt is found in the prefix cache of the engine it went to; greedy answers are
// the ones a single engine gives; /metrics sums the engines; shutdown stops both.
import assert from "node:assert/strict";
import { test } from "node:test";
import OpenAI from "openai";
import { DataParallelEngine } from "../../src/engine/data-parallel-engine.js";
import { parseServeArgs } from "../../src/cli/serve-args.js";
import { parseMetrics } from "../../src/server/metrics.js";
import { serve } from "../../src/server/start-server.js";

const tenants = Array.from({ length: 8 }, (_, t) => `Tenant ${t}: ${"you explain English words to the users of this service, briefly and kindly. ".repeat(6)}`);

async function ask(client: OpenAI, t: number): Promise<string> {
  const r = await client.chat.completions.create({
    model: "kvflash-default",
    messages: [
      { role: "system", content: tenants[t]! },
      { role: "user", content: "What does happy mean?" },
    ],
    max_tokens: 12,
    temperature: 0,
  });
  return r.choices[0]!.message.content ?? "";
}

test("--data-parallel-size parses, and is bounded", () => {
  assert.equal(parseServeArgs(["--data-parallel-size", "3"], {}).dataParallelSize, 3);
  assert.throws(() => parseServeArgs(["--data-parallel-size", "0"], {}), /--data-parallel-size.*must be an integer ≥ 1, got "0"/);
  assert.throws(() => parseServeArgs(["--data-parallel-size", "65"], {}), /--data-parallel-size.*\[1, 64\], got 65/);
});

test("two engines behind one front: both serve, affinity finds each tenant's prefix, answers match one engine's", async () => {
  const single = await serve({ port: 0, threads: 1 });
  const dp = await serve({ port: 0, threads: 1, dataParallelSize: 2 });
  try {
    await Promise.all([single.ready, dp.ready]);
    assert.ok(dp.engine instanceof DataParallelEngine);
    assert.equal(dp.engine.size, 2);
    const one = new OpenAI({ baseURL: `${single.url}/v1`, apiKey: "x", maxRetries: 0 });
    const two = new OpenAI({ baseURL: `${dp.url}/v1`, apiKey: "x", maxRetries: 0 });
    const want = await Promise.all(tenants.map((_, t) => ask(one, t)));
    const first = await Promise.all(tenants.map((_, t) => ask(two, t)));
    const again = await Promise.all(tenants.map((_, t) => ask(two, t)));
    assert.deepEqual(first, want, "greedy answers do not depend on the engine");
    assert.deepEqual(again, want);

    const per = await dp.engine.statsPerEngine();
    for (const [e, s] of per.entries()) assert.ok(s !== null && s.promptTokens > 0, `engine ${e} served requests`);
    // The second round (half the queried tokens) found each tenant's system prompt, all but its last
    // partial block, where the first round left it: ≥ 85% of its tokens. Routing that ignored the
    // prefix would send about half the tenants to the other engine, for about 45%.
    const hits = per.reduce((n, s) => n + s!.prefixCacheHits, 0);
    const queried = (await dp.engine.stats())!.prefixCacheQueries;
    assert.ok(hits >= 0.85 * (queried / 2), `prefix hits ${hits} of the second round's ${queried / 2} queried tokens`);

    const m = parseMetrics(await (await fetch(`${dp.url}/metrics`)).text());
    const sum = per.reduce((n, s) => n + s!.promptTokens, 0);
    assert.equal(m.get('vllm:prompt_tokens_total{model_name="kvflash-default"}'), sum, "/metrics sums the engines");
    assert.equal((await fetch(`${dp.url}/health`)).status, 200);
  } finally {
    await Promise.all([single.close(), dp.close()]);
  }
  assert.equal(dp.engine.state.state, "stopped");
});

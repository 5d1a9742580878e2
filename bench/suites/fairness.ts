/**
 * Suite `fairness` (issue #14, item 11: one request with many prompts must
 * not starve other clients): a `kvflash serve` of the default model with
 * --max-num-seqs 16; one client sends 128 prompts of 64 tokens (32 output
 * tokens each), and 100 ms later another client sends a 4-token prompt for 4
 * tokens. `small_ms` is how long the small request took.
 *
 * Two rows from the same server: the 128 prompts as one client request (a
 * prompt list: the scheduler shares admission fairly between client
 * requests, so the small one takes the next free seat), and as 128 separate
 * client requests (each its own client: the small request queues behind
 * them in arrival order, which is what a prompt list got before).
 */
import { type ChildProcess, spawn } from "node:child_process";
import { loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { defaultModelDir } from "../../src/index.js";
import type { Row, Suite } from "../harness.js";
import { ownChild } from "../child-processes.js";

const CLI = fileURLToPath(new URL("../../src/cli/main.js", import.meta.url));
const MODEL = "fairness-bench";

async function startServer(args: string[]): Promise<{ url: string; proc: ChildProcess }> {
  const proc = ownChild(spawn(process.execPath, [CLI, "serve", "--port", "0", "--threads", "1", "--served-model-name", MODEL, ...args], { stdio: ["ignore", "ignore", "pipe"] }));
  let stderr = "";
  proc.stderr!.setEncoding("utf8");
  return new Promise((resolve, reject) => {
    const onData = (chunk: string): void => {
      stderr += chunk;
      const url = /listening on (http:\/\/\S+)/.exec(stderr)?.[1];
      if (url && /ready in/.test(stderr)) {
        proc.stderr!.off("data", onData);
        proc.stderr!.resume();
        resolve({ url, proc });
      }
    };
    proc.stderr!.on("data", onData);
    proc.once("exit", (code) => reject(new Error(`the server exited with code ${code}:\n${stderr}`)));
  });
}

async function complete(url: string, body: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${url}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ model: MODEL, ...body }) });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`/v1/completions answered ${res.status}: ${text.slice(0, 300)}`);
}

export const fairness: Suite = {
  name: "fairness",
  description: "a 4-token request's latency behind 128 prompts from another client: as one prompt list vs as 128 requests (#14 item 11)",
  async run({ quick, log }) {
    const numPrompts = quick ? 64 : 128;
    const prompts = Array.from({ length: numPrompts }, (_, i) => Array.from({ length: 64 }, (_, j) => 100 + ((i * 64 + j) % 20000)));
    const { url, proc } = await startServer(["--model", defaultModelDir(), "--max-num-seqs", "16"]);
    const rows: Row[] = [];
    try {
      await complete(url, { prompt: "warm up", max_tokens: 2 });
      for (const shape of ["one prompt list", "separate requests"] as const) {
        const t0 = performance.now();
        const big =
          shape === "one prompt list" ? complete(url, { prompt: prompts, max_tokens: 32, ignore_eos: true })
          : Promise.all(prompts.map((p) => complete(url, { prompt: p, max_tokens: 32, ignore_eos: true })));
        const bigDone = big.then(() => performance.now() - t0);
        await new Promise((r) => setTimeout(r, 100));
        const t1 = performance.now();
        await complete(url, { prompt: [5, 6, 7, 8], max_tokens: 4, ignore_eos: true });
        const smallMs = performance.now() - t1;
        const bigMs = await bigDone;
        log(`  ${shape}: small request ${smallMs.toFixed(0)} ms, the ${numPrompts} prompts ${bigMs.toFixed(0)} ms`);
        rows.push({ prompts_shape: shape, prompts: numPrompts, small_ms: Math.round(smallMs), big_ms: Math.round(bigMs), load1: Math.round(loadavg()[0]! * 100) / 100 });
      }
    } finally {
      proc.kill("SIGTERM");
      await new Promise((r) => proc.once("exit", r));
    }
    return rows;
  },
};

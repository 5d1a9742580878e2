// A grammar host that dies mid-stream (issue #32 item 1): its worker is
// terminated, as by a crash or an OOM kill (grammar-host-killer-loader.ts,
// through the pool's in-process hook). Only the requests whose matchers live
// on that host fail, each with a clear error and no hang; a structured stream
// on another host runs to its end; /health answers within 1 s throughout; and
// structured requests afterwards succeed, the dead host's grammar too (it
// compiles again in a fresh host).
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { after, before, test } from "node:test";
import { DEFAULT_LOADER } from "../../src/server/start-server.js";
import { MODEL, type ServerProcess, metric, modelArgs, startServer, waitMetrics } from "./harness.js";

const KILLER = fileURLToPath(new URL("./grammar-host-killer-loader.js", import.meta.url));
const dir = mkdtempSync(join(tmpdir(), "kvflash-host-crash-"));
const trigger = join(dir, "kill");
let server: ServerProcess;
before(async () => {
  server = await startServer(["--loader", KILLER, "--loader-options", JSON.stringify({ base: DEFAULT_LOADER, triggerFile: trigger, stepDelayMs: 25 }), ...modelArgs()]);
});
after(async () => {
  rmSync(dir, { recursive: true, force: true });
  assert.equal(await server.stop(), 0, server.stderr());
});

/** Exactly LENGTH characters: at least LENGTH / (the longest [ab]-only token) steps, then a stop. */
const LENGTH = 600;
const SURVIVOR = `[ab]{${LENGTH}}`;
const VICTIM = `[cd]{${LENGTH}}`;
const MAX_TOKENS = 2000;

interface Streamed {
  /** Data events received so far (the [DONE] excluded), parsed. */
  events: { choices?: { text: string; finish_reason: string | null }[]; error?: { message: string } }[];
  /** When each event arrived (Date.now()). */
  times: number[];
  done: Promise<void>;
}

/** Starts a constrained completion stream and collects its events as they arrive. */
function stream(pattern: string): Streamed {
  const events: Streamed["events"] = [];
  const times: number[] = [];
  const done = (async () => {
    const res = await fetch(`${server.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, prompt: "x", max_tokens: MAX_TOKENS, temperature: 1, seed: 5, guided_regex: pattern, stream: true }),
    });
    if (res.status !== 200) assert.fail(`the stream was refused: ${res.status} ${await res.text()}`);
    let buffered = "";
    const decoder = new TextDecoder();
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffered += decoder.decode(chunk, { stream: true });
      const lines = buffered.split("\n\n");
      buffered = lines.pop()!;
      for (const line of lines) {
        if (!line.startsWith("data: {")) continue;
        events.push(JSON.parse(line.slice(6)));
        times.push(Date.now());
      }
    }
  })();
  return { events, times, done };
}

const text = (s: Streamed) => s.events.map((e) => e.choices?.[0]?.text ?? "").join("");
async function until(what: string, cond: () => boolean, ms = 60_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!cond()) {
    assert.ok(Date.now() < deadline, `timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test("a grammar host killed mid-stream fails only its own request, with a clear error; a stream on another host goes on, /health answers within 1 s, and new structured requests succeed", { timeout: 120_000 }, async () => {
  const survivor = stream(SURVIVOR);
  await until("the survivor streams", () => survivor.events.length >= 3);
  // Its matcher lives on the first host: the victim's new grammar compiles on another (grammar-host-pool.ts).
  const victim = stream(VICTIM);
  await until("the victim streams", () => victim.events.length >= 3);
  assert.ok(text(survivor).length < LENGTH / 2, `the survivor is still mid-stream (${text(survivor).length} characters, ${survivor.events.length} events)`);

  let polling = true;
  const healthMs: number[] = [];
  const health = (async () => {
    while (polling) {
      const t0 = Date.now();
      const r = await fetch(`${server.url}/health`);
      healthMs.push(Date.now() - t0);
      assert.equal(r.status, 200);
      await new Promise((r) => setTimeout(r, 50));
    }
  })();

  const killedAt = Date.now();
  writeFileSync(trigger, VICTIM);
  await until(`the host is killed:\n${server.stderr()}`, () => existsSync(`${trigger}.done`), 10_000);
  assert.equal(readFileSync(`${trigger}.done`, "utf8"), "1", "one host held the victim's grammar, and only it was killed");
  await Promise.race([victim.done, new Promise((_, reject) => setTimeout(() => reject(new Error("the victim's stream hung after its host died")), 10_000))]);
  // While the survivor still streams (its host has a live matcher, the victim's is gone): a new grammar, and the dead
  // host's grammar again (it left the cache with its host), both compile in a fresh host and run.
  for (const pattern of ["[ef]{12}", VICTIM]) {
    const r = await server.openai.completions.create({ model: MODEL, prompt: "y", max_tokens: 10, seed: 1, guided_regex: pattern } as never);
    assert.match(r.choices[0]!.text, pattern === VICTIM ? /^[cd]+$/ : /^[ef]+$/, pattern);
  }
  await survivor.done;
  polling = false;
  await health;

  const victimError = victim.events.find((e) => e.error !== undefined)?.error;
  assert.ok(victimError !== undefined, `the victim's stream carries an error: ${JSON.stringify(victim.events.slice(-2))}`);
  assert.match(victimError.message, /grammar host exited/);
  assert.match(text(victim), /^[cd]*$/);
  assert.ok(text(victim).length < LENGTH, "the victim stopped early");

  assert.ok(survivor.events.every((e) => e.error === undefined), `the survivor carries no error: ${JSON.stringify(survivor.events.find((e) => e.error))}`);
  assert.equal(survivor.events.at(-1)?.choices?.[0]?.finish_reason, "stop", "the survivor completed its grammar");
  assert.match(text(survivor), new RegExp(`^${SURVIVOR}$`), "the survivor kept its grammar to the end");
  // A generous liveness bound: a step must not block on the dead host (its exit event cannot arrive while the engine waits for masks).
  const gaps = survivor.times.slice(1).map((t, i) => [t - survivor.times[i]!, t] as const).filter(([, t]) => t > killedAt);
  assert.ok(gaps.length >= 3, `the survivor streamed ${gaps.length} events after the kill`);
  assert.ok(Math.max(...gaps.map(([g]) => g)) < 1000, `the survivor's longest gap after the kill: ${Math.max(...gaps.map(([g]) => g))} ms`);

  assert.ok(healthMs.length >= 3, `/health was polled ${healthMs.length} times`);
  assert.ok(Math.max(...healthMs) < 1000, `/health answered in at most ${Math.max(...healthMs)} ms`);

  await waitMetrics(server, (m) => metric(m, "vllm:num_requests_running") === 0);
});

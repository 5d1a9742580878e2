// The web chat page in a real headless Chromium (Debian's chromium driven by
// playwright-core): it loads, waits for the model, streams a reply that equals
// the API's greedy answer to the same conversation, carries the conversation
// into the next turn, and its Stop button cancels a generation on the server.
// Chromium must be installed (`.ci/run` installs it): a missing browser fails
// this test rather than skipping it.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { type BrowserContext, type Page, chromium } from "playwright-core";
import { MODEL, type ServerProcess, metric, modelArgs, startServer, waitMetrics } from "./harness.js";

const CHROMIUM = process.env["KVFLASH_CHROMIUM"] ?? "/usr/bin/chromium";
const FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

let server: ServerProcess;
let browser: BrowserContext;
let profile: string;

before(async () => {
  assert.ok(existsSync(CHROMIUM), `Chromium is missing at ${CHROMIUM}: install it with \`apt-get install -y chromium\` (.ci/run does), or set KVFLASH_CHROMIUM`);
  server = await startServer(modelArgs());
  profile = mkdtempSync(join(tmpdir(), "kvflash-chromium-"));
  browser = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: FLAGS });
});

after(async () => {
  await browser?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
  if (server) assert.equal(await server.stop(), 0, server.stderr());
});

async function apiReply(messages: { role: "user" | "assistant"; content: string }[], maxTokens: number): Promise<string> {
  const r = await server.openai.chat.completions.create({ model: MODEL, messages, max_tokens: maxTokens, temperature: 0 });
  return r.choices[0]!.message.content ?? "";
}

async function say(page: Page, text: string): Promise<{ text: string; finish: string; meta: string }> {
  const before = await page.locator(".msg.assistant").count();
  await page.fill("#prompt", text);
  await page.press("#prompt", "Enter");
  const reply = page.locator(".msg.assistant").nth(before);
  await reply.locator(".meta").waitFor({ timeout: 30_000 });
  return {
    text: (await reply.locator(".text").textContent()) ?? "",
    finish: (await reply.getAttribute("data-finish")) ?? "",
    meta: (await reply.locator(".meta").textContent()) ?? "",
  };
}

test("the page streams greedy replies equal to the API's, over a two-turn conversation", { timeout: 60_000 }, async () => {
  const page = await browser.newPage();
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(e.message));
  await page.goto(server.url);
  await page.locator("#status", { hasText: "ready" }).waitFor({ timeout: 30_000 });
  assert.equal(await page.textContent("#model"), MODEL);
  await page.locator("#settings summary").click();
  await page.fill("#temperature", "0");
  await page.fill("#max-tokens", "12");

  const first = await say(page, "Name three colours.");
  const want1 = await apiReply([{ role: "user", content: "Name three colours." }], 12);
  assert.equal(first.text, want1);
  assert.match(first.finish, /^(length|stop)$/);
  assert.match(first.meta, /\d+ tokens in [\d.]+ s/);

  const second = await say(page, "And three more?");
  const want2 = await apiReply(
    [
      { role: "user", content: "Name three colours." },
      { role: "assistant", content: want1 },
      { role: "user", content: "And three more?" },
    ],
    12,
  );
  assert.equal(second.text, want2);
  assert.deepEqual(errors, []);
  await page.close();
});

test("Stop cancels the generation on the server and frees its blocks", { timeout: 60_000 }, async () => {
  const page = await browser.newPage();
  await page.goto(server.url);
  await page.locator("#status", { hasText: "ready" }).waitFor({ timeout: 30_000 });
  await page.locator("#settings summary").click();
  await page.fill("#max-tokens", "2000");
  const aborts = metric(await server.metrics(), "vllm:request_success_total", { finished_reason: "abort" });
  // Press Stop as soon as the first text arrives (in the page, so no time passes in between).
  await page.evaluate(`new MutationObserver((_, observer) => {
    const reply = document.querySelector(".msg.assistant .text");
    if (reply && reply.textContent.length > 0) {
      observer.disconnect();
      document.getElementById("stop").click();
    }
  }).observe(document.getElementById("messages"), { subtree: true, childList: true, characterData: true })`);
  await page.fill("#prompt", "Go on forever.");
  await page.press("#prompt", "Enter");
  const reply = page.locator(".msg.assistant").last();
  await reply.locator(".meta", { hasText: "stopped" }).waitFor();
  assert.ok(((await reply.locator(".text").textContent()) ?? "").length > 0);
  const m = await waitMetrics(server, (x) => metric(x, "vllm:request_success_total", { finished_reason: "abort" }) === aborts + 1);
  assert.equal(metric(m, "vllm:num_requests_running"), 0);
  assert.equal(metric(m, "kvflash:num_free_kv_blocks"), metric(m, "kvflash:num_kv_blocks"));
  await page.close();
});

// The web chat page in a real headless Chromium (Debian's chromium driven by
// playwright-core): it loads, waits for the model, streams a reply that equals
// the API's greedy answer to the same conversation, carries the conversation
// into the next turn, and its Stop button cancels a generation on the server.
// It renders the assistant's markdown sanitized, with only the message list
// scrolling, loads nothing from anywhere but the server, and after a 401
// points to the API-key field and retries once a key is entered. A screenshot
// goes to $KVFLASH_TEST_ARTIFACTS (default: kvflash-test-artifacts in the
// temporary directory); the test prints its path.
// Chromium must be installed (`.ci/run` installs it): a missing browser fails
// this test rather than skipping it.
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
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

/** `markdown` as the page renders it: marked, then DOMPurify, as chat.js imports and calls them. */
async function rendered(page: Page, markdown: string): Promise<string> {
  return page.evaluate(async (text) => {
    const { marked } = (await import("/vendor/marked.esm.js" as string)) as { marked: { parse(t: string, o: object): string } };
    const purify = (await import("/vendor/purify.es.mjs" as string)) as { default: { sanitize(html: string): string } };
    return purify.default.sanitize(marked.parse(text, { async: false, gfm: true, breaks: true }));
  }, markdown);
}

async function say(page: Page, text: string): Promise<{ html: string; finish: string; meta: string }> {
  const before = await page.locator(".msg.assistant").count();
  await page.fill("#prompt", text);
  await page.press("#prompt", "Enter");
  const reply = page.locator(".msg.assistant").nth(before);
  await reply.locator(".meta").waitFor({ timeout: 30_000 });
  return {
    html: await reply.locator(".text").innerHTML(),
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
  assert.equal(first.html, await rendered(page, want1));
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
  assert.equal(second.html, await rendered(page, want2));
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

/** A canned chat completion stream, as the server sends it (SSE chunks, usage, [DONE]). */
function sse(deltas: readonly string[]): string {
  const chunk = (choices: unknown[], extra: object = {}) => `data: ${JSON.stringify({ id: "chatcmpl-x", object: "chat.completion.chunk", created: 0, model: MODEL, choices, ...extra })}\n\n`;
  return (
    deltas.map((content) => chunk([{ index: 0, delta: { content }, finish_reason: null }])).join("") +
    chunk([{ index: 0, delta: {}, finish_reason: "stop" }]) +
    chunk([], { usage: { prompt_tokens: 5, completion_tokens: deltas.length, total_tokens: 5 + deltas.length } }) +
    "data: [DONE]\n\n"
  );
}

const MARKDOWN = [
  "Here is **bold**, `inline code` and a list:\n\n",
  "- one\n- two\n- three\n\n",
  "```js\nconst answer = 6 * 7;\nconsole.log(answer);\n```\n\n",
  '<img src="x" onerror="window.__xss = 1"> <script>window.__xss = 2</script>',
  '[a link](javascript:window.__xss=3)\n\n',
  ...Array.from({ length: 60 }, (_, i) => `Paragraph ${i + 1} of a long reply.\n\n`),
];

test("markdown renders sanitized; only the message list scrolls; everything comes from the server", { timeout: 60_000 }, async (t) => {
  const page = await browser.newPage();
  await page.setViewportSize({ width: 900, height: 600 });
  const errors: string[] = [];
  const elsewhere: string[] = [];
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("request", (r) => {
    if (!r.url().startsWith(`${server.url}/`)) elsewhere.push(r.url());
  });
  // The reply is canned (the test model's text is random tokens): it is the page's rendering under test here.
  await page.route(`${server.url}/v1/chat/completions`, (route) => route.fulfill({ status: 200, contentType: "text/event-stream", body: sse(MARKDOWN) }));
  await page.goto(server.url);
  await page.locator("#status", { hasText: "ready" }).waitFor({ timeout: 30_000 });
  const reply = await say(page, "Show me some markdown.");
  assert.equal(reply.finish, "stop");
  assert.equal(reply.html, await rendered(page, MARKDOWN.join("")));

  const text = page.locator(".msg.assistant .text").last();
  assert.equal(await text.locator("strong").textContent(), "bold");
  assert.equal(await text.locator("ul > li").count(), 3);
  assert.equal(await text.locator("pre > code").textContent(), "const answer = 6 * 7;\nconsole.log(answer);\n");
  assert.equal(await text.locator("script, [onerror]").count(), 0);
  assert.equal(await text.locator("a[href^='javascript']").count(), 0);
  assert.equal(await page.evaluate("window.__xss"), undefined);
  assert.match(await page.textContent(".msg.user .text") ?? "", /^Show me some markdown\.$/);

  // Fixed header and composer: the document does not scroll, the list does, and it shows its end.
  const layout = (await page.evaluate(`(() => {
    const m = document.getElementById("messages");
    const rect = (id) => document.getElementById(id).getBoundingClientRect();
    return {
      documentScrolls: document.scrollingElement.scrollHeight > innerHeight,
      listScrolls: m.scrollHeight > m.clientHeight,
      listAtEnd: m.scrollHeight - m.scrollTop - m.clientHeight < 2,
      headerTop: document.querySelector("header").getBoundingClientRect().top,
      composerBottom: rect("composer").bottom,
      height: innerHeight,
    };
  })()`)) as { documentScrolls: boolean; listScrolls: boolean; listAtEnd: boolean; headerTop: number; composerBottom: number; height: number };
  assert.deepEqual({ documentScrolls: layout.documentScrolls, listScrolls: layout.listScrolls, listAtEnd: layout.listAtEnd }, { documentScrolls: false, listScrolls: true, listAtEnd: true });
  assert.equal(layout.headerTop, 0);
  assert.ok(layout.composerBottom <= layout.height, `the composer ends at ${layout.composerBottom}, below the ${layout.height} px viewport`);

  // The favicon is the server's.
  const icon = (await page.evaluate(`fetch(document.querySelector("link[rel=icon]").href).then((r) => [r.status, r.headers.get("content-type")])`)) as [number, string];
  assert.deepEqual(icon, [200, "image/svg+xml"]);

  const dir = process.env["KVFLASH_TEST_ARTIFACTS"] ?? join(tmpdir(), "kvflash-test-artifacts");
  mkdirSync(dir, { recursive: true });
  const shot = join(dir, "web-chat.png");
  await page.screenshot({ path: shot });
  const top = join(dir, "web-chat-markdown.png");
  await page.evaluate(`document.getElementById("messages").scrollTop = 0`);
  await page.screenshot({ path: top });
  t.diagnostic(`screenshots: ${shot} ${top}`);
  console.log(`web-chat screenshots: ${shot} ${top}`);

  assert.deepEqual(elsewhere, [], "the page loads nothing from elsewhere (no CDN)");
  assert.deepEqual(errors, []);
  await page.close();
});

test("after a 401 the page points to the API-key field and retries once a key is entered", { timeout: 90_000 }, async () => {
  const key = "sk-web-chat-test";
  const guarded = await startServer([...modelArgs(), "--api-key", key], { apiKey: key });
  try {
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on("pageerror", (e) => errors.push(e.message));
    await page.goto(guarded.url);
    // GET /v1/models is refused: the settings open with the key field focused and marked.
    await page.locator("#status", { hasText: "API key" }).waitFor({ timeout: 30_000 });
    assert.equal(await page.evaluate(`document.getElementById("settings").open`), true);
    assert.equal(await page.evaluate(`document.activeElement.id`), "api-key");
    assert.ok(await page.locator("#api-key.needed").isVisible());
    assert.ok(await page.locator("#api-key-hint").isVisible());
    // Entering the key retries: the model name arrives.
    await page.fill("#api-key", key);
    await page.press("#api-key", "Enter");
    await page.locator("#status", { hasText: "ready" }).waitFor();
    assert.equal(await page.textContent("#model"), MODEL);
    assert.equal(await page.locator("#api-key.needed").count(), 0);

    // A chat request with a wrong key: 401, pointed to the field again; the right key resends the message once.
    await page.fill("#temperature", "0");
    await page.fill("#max-tokens", "8");
    await page.fill("#api-key", "sk-wrong");
    await page.fill("#prompt", "Hello?"); // the key field's change event: nothing to retry, nothing happens
    await page.press("#prompt", "Enter");
    await page.locator(".msg.assistant.error .meta", { hasText: "401" }).waitFor({ timeout: 30_000 });
    assert.equal(await page.evaluate(`document.activeElement.id`), "api-key");
    await page.fill("#api-key", key);
    await page.press("#api-key", "Enter");
    const reply = page.locator(".msg.assistant").last();
    await reply.locator(".meta", { hasText: "finish" }).waitFor({ timeout: 30_000 });
    assert.equal(await page.locator(".msg.error").count(), 0, "the failed turn is replaced by its retry");
    assert.equal(await page.locator(".msg.user").count(), 1);
    const want = await guarded.openai.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hello?" }], max_tokens: 8, temperature: 0 });
    assert.equal(await reply.locator(".text").innerHTML(), await rendered(page, want.choices[0]!.message.content ?? ""));
    assert.deepEqual(errors, []);
    await page.close();
  } finally {
    assert.equal(await guarded.stop(), 0, guarded.stderr());
  }
});

// What a new user sees first: `npm start` (serve with no --model), the chat page in a real
// headless Chromium, and the embedded default model answering in real sentences (#15): a
// taught word from WordNet, an untaught one (brisk) by its trained refusal (#29).
// Greedy (temperature 0 in the page's settings), so the reply equals the API's. The
// screenshot goes to $KVFLASH_TEST_ARTIFACTS (default: kvflash-test-artifacts in the
// temporary directory) as web-chat-default-model.png; the test prints its path.
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { type BrowserContext, chromium } from "playwright-core";
import { type ServerProcess, startServer } from "./harness.js";

const CHROMIUM = process.env["KVFLASH_CHROMIUM"] ?? "/usr/bin/chromium";

let server: ServerProcess;
let browser: BrowserContext;
let profile: string;

before(async () => {
  assert.ok(existsSync(CHROMIUM), `Chromium is missing at ${CHROMIUM}: install it with \`apt-get install -y chromium\` (.ci/run does), or set KVFLASH_CHROMIUM`);
  server = await startServer([]);
  profile = mkdtempSync(join(tmpdir(), "kvflash-chromium-"));
  browser = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"] });
});

after(async () => {
  await browser?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
  if (server) assert.equal(await server.stop(), 0, server.stderr());
});

test("the default model answers on the chat page in real sentences", { timeout: 90_000 }, async (t) => {
  const page = await browser.newPage();
  await page.setViewportSize({ width: 900, height: 640 });
  await page.goto(server.url);
  await page.locator("#status", { hasText: "ready" }).waitFor({ timeout: 30_000 });
  assert.equal(await page.textContent("#model"), "kvflash-default");
  // The temperature field is empty (the model's own default) until set; greedy here, to compare with the API.
  await page.locator("#settings summary").click();
  assert.equal(await page.inputValue("#temperature"), "");
  await page.fill("#temperature", "0");
  await page.locator("#settings summary").click();
  const history: { role: "user" | "assistant"; content: string }[] = [];
  for (const [question, word] of [["Hello", /word/i], ["What is a river?", /river is a large natural stream of water/i], ["What does brisk mean?", /^I don't know that word\./]] as const) {
    const n = await page.locator(".msg.assistant").count();
    await page.fill("#prompt", question);
    await page.press("#prompt", "Enter");
    const reply = page.locator(".msg.assistant").nth(n);
    await reply.locator(".meta").waitFor({ timeout: 30_000 });
    const text = ((await reply.locator(".text").textContent()) ?? "").trim();
    assert.equal(await reply.getAttribute("data-finish"), "stop", `${question} → ${text}`);
    assert.match(text, word, `${question} → ${text}`);
    assert.match(text, /^[A-Z][^]*[.!?"]$/, `${question} → a sentence, got ${JSON.stringify(text)}`);
    // The page's reply is the API's greedy answer to the same conversation.
    history.push({ role: "user", content: question });
    const api = await server.openai.chat.completions.create({ model: "kvflash-default", messages: history, temperature: 0, max_tokens: 256 });
    assert.equal(text, (api.choices[0]!.message.content ?? "").trim());
    history.push({ role: "assistant", content: api.choices[0]!.message.content ?? "" });
    t.diagnostic(`${question} → ${text}`);
  }
  const dir = process.env["KVFLASH_TEST_ARTIFACTS"] ?? join(tmpdir(), "kvflash-test-artifacts");
  mkdirSync(dir, { recursive: true });
  const shot = join(dir, "web-chat-default-model.png");
  await page.screenshot({ path: shot });
  t.diagnostic(`screenshot: ${shot}`);
  console.log(`web-chat default-model screenshot: ${shot}`);
  await page.close();
});

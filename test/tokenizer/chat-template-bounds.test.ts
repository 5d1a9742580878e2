// Chat templates from hostile model files run under a time and size bound
// (src/tokenizer/bounded-render.ts): a template that loops or grows a value
// without bound fails the load, naming where it came from; one that does so
// only for some conversations fails that request alone (a 400 through the
// served OpenAI API), and the server and the next request go on.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import OpenAI from "openai";
import { ArgumentError, serve } from "../../src/index.js";
import { writeTinyModel } from "../../src/testing/index.js";
import { RENDER_LIMITS, type RenderLimits } from "../../src/tokenizer/bounded-render.js";
import { ChatTemplate } from "../../src/tokenizer/chat-template.js";

const FAST: RenderLimits = { timeMs: 100, maxItems: 1 << 16, maxChars: 1 << 20 };
/** 10^12 steps: a template that never ends in practice. */
const NESTED = "{% for a in range(10000) %}{% for b in range(10000) %}{% for c in range(10000) %}{% endfor %}{% endfor %}{% endfor %}";
/** Loops only when a message's content is "loop". */
const TRIGGERED = `{% for m in messages %}{% if m.content == 'loop' %}${NESTED}{% endif %}<{{ m.role }}>{{ m.content }}{% endfor %}`;

const refused = (origin: string, what: RegExp) => (e: Error) => e instanceof ArgumentError && e.message.startsWith(`${origin} `) && what.test(e.message);

test("at load, at the default bound: a template that loops fails the load naming its origin", () => {
  const t0 = performance.now();
  assert.throws(() => new ChatTemplate(NESTED, "x/tokenizer_config.json chat_template"), refused("x/tokenizer_config.json chat_template", new RegExp(`ran past the ${RENDER_LIMITS.timeMs} ms limit for one render .* on a four-message sample conversation: the template loops or grows without bound`)));
  assert.ok(performance.now() - t0 < 10 * RENDER_LIMITS.timeMs, "stopped near the bound");
});

test("at load: values that grow without bound are refused by size (a doubled list, a doubled string, range(10**9))", () => {
  const origin = "chat_template.jinja";
  assert.throws(() => new ChatTemplate("{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}", origin, FAST), refused(origin, /made a list of 131072 items, above the limit of 65536/));
  assert.throws(() => new ChatTemplate("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}", origin, FAST), refused(origin, /made a string of 2097152 characters, above the limit of 1048576/));
  assert.throws(() => new ChatTemplate("{% for i in range(10**9) %}{{ i }}{% endfor %}", origin, FAST), refused(origin, /called range\(\) for 1000000000 items, above the limit of 65536/));
  // A template that only raises for the sample's roles is not refused at load: its errors are its own rules.
  const strict = new ChatTemplate("{% if messages[0].role == 'system' %}{{ raise_exception('no system role') }}{% endif %}{{ messages[0].content }}", origin, FAST);
  assert.equal(strict.render([{ role: "user", content: "hi" }]), "hi");
});

test("per request: a conversation that makes the template loop is refused alone; the next one renders", () => {
  const t = new ChatTemplate(TRIGGERED, "chat_template", FAST);
  assert.throws(() => t.render([{ role: "user", content: "loop" }]), (e: Error) => e instanceof ArgumentError && /^messages could not be rendered: the chat template ran past the 100 ms limit for one render/.test(e.message));
  assert.equal(t.render([{ role: "user", content: "hi" }]), "<user>hi");
  // Unbounded recursion ends at the bound or in V8's stack overflow, whichever comes first; the
  // overflow may surface inside the interpreter as a failed lookup ("Cannot call something that is
  // not a function"): either way this request alone is refused.
  const recursive = new ChatTemplate("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{% if messages[0].content == 'deep' %}{{ f(0) }}{% endif %}ok", "chat_template", FAST);
  assert.throws(() => recursive.render([{ role: "user", content: "deep" }]), /^ArgumentError: messages (could not be rendered: the chat template ran past the 100 ms limit|were rejected by the chat template: (Maximum call stack size exceeded|Cannot call something that is not a function))/);
  assert.equal(recursive.render([{ role: "user", content: "x" }]), "ok");
});

test("served: a chat request that makes the model's template loop gets a 400 within the bound; /health answers and the next request completes", { timeout: 120_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), "kvflash-tpl-loop-"));
  try {
    writeTinyModel(dir, { arch: "qwen3", hiddenSize: 32, intermediateSize: 64, numLayers: 1, numHeads: 2, numKvHeads: 1 });
    writeFileSync(join(dir, "chat_template.jinja"), TRIGGERED);
    const server = await serve({ modelDir: dir, port: 0 });
    try {
      while ((await fetch(`${server.url}/health`)).status !== 200) await new Promise((r) => setTimeout(r, 50));
      const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: "unused", maxRetries: 0, timeout: 60_000 });
      const model = (await client.models.list()).data[0]!.id;
      const t0 = performance.now();
      await assert.rejects(client.chat.completions.create({ model, messages: [{ role: "user", content: "loop" }], max_tokens: 2 }), (e: Error) => e instanceof OpenAI.BadRequestError && /chat template ran past the 2000 ms limit/.test(e.message));
      assert.ok(performance.now() - t0 < 10 * RENDER_LIMITS.timeMs);
      assert.equal((await fetch(`${server.url}/health`)).status, 200);
      const ok = await client.chat.completions.create({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 2 });
      assert.equal(ok.choices.length, 1);
    } finally {
      await server.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// The web chat page: streams replies from POST /v1/chat/completions (SSE),
// keeps the conversation in memory, shows load progress from GET /health.
// Plain browser JavaScript, no build step. The user's text only ever goes in
// textContent; the assistant's markdown is rendered by marked and sanitized by
// DOMPurify (both served by kvflash from its dependencies) before it is set as
// HTML. After a 401 the page points to the API-key field and retries once a
// key is entered.
import { marked } from "/vendor/marked.esm.js";
import DOMPurify from "/vendor/purify.es.mjs";

const $ = (id) => document.getElementById(id);
const els = {
  model: $("model"),
  status: $("status"),
  messages: $("messages"),
  composer: $("composer"),
  prompt: $("prompt"),
  send: $("send"),
  stop: $("stop"),
  clear: $("clear"),
  system: $("system"),
  temperature: $("temperature"),
  maxTokens: $("max-tokens"),
  apiKey: $("api-key"),
  apiKeyHint: $("api-key-hint"),
  settings: $("settings"),
};

/** The conversation: { role, content } as the API takes it. */
let history = [];
let modelName = null;
let controller = null;
/** What to do again once an API key is entered after a 401 (at most once per key). */
let retryWithKey = null;

for (const [key, el] of [["kvflash.apiKey", els.apiKey], ["kvflash.system", els.system], ["kvflash.temperature", els.temperature], ["kvflash.maxTokens", els.maxTokens]]) {
  const saved = localStorage.getItem(key);
  if (saved !== null) el.value = saved;
  el.addEventListener("change", () => localStorage.setItem(key, el.value));
}

function headers() {
  const h = { "content-type": "application/json" };
  if (els.apiKey.value) h.authorization = `Bearer ${els.apiKey.value}`;
  return h;
}

function setStatus(text) {
  els.status.textContent = text;
}

/** Markdown → sanitized HTML (GitHub-flavoured; a single newline is a line break, as the model wrote it). */
function renderMarkdown(text) {
  return DOMPurify.sanitize(marked.parse(text, { async: false, gfm: true, breaks: true }));
}

/** Whether the message list shows its end (then new text keeps it there; a reader who scrolled up stays put). */
function atBottom() {
  const m = els.messages;
  return m.scrollHeight - m.scrollTop - m.clientHeight < 24;
}

function scrollToEnd() {
  els.messages.scrollTop = els.messages.scrollHeight;
}

function addMessage(role, text = "") {
  const div = document.createElement("div");
  div.className = `msg ${role}`;
  const body = document.createElement("div");
  body.className = "text";
  body.textContent = text;
  div.append(body);
  els.messages.append(div);
  scrollToEnd();
  return div;
}

function setMeta(div, text) {
  let meta = div.querySelector(".meta");
  if (!meta) {
    meta = document.createElement("span");
    meta.className = "meta";
    div.append(meta);
  }
  meta.textContent = text;
}

/** A 401: open the settings, point to the API-key field, and run `retry` once a key is entered. */
function needApiKey(retry) {
  retryWithKey = retry;
  els.settings.open = true;
  els.apiKey.classList.add("needed");
  els.apiKeyHint.hidden = false;
  els.apiKey.focus();
  setStatus("the server needs an API key (Settings)");
}

els.apiKey.addEventListener("change", () => {
  if (!els.apiKey.value) return;
  els.apiKey.classList.remove("needed");
  els.apiKeyHint.hidden = true;
  const retry = retryWithKey;
  retryWithKey = null;
  if (retry) void retry();
});
els.apiKey.addEventListener("keydown", (e) => {
  if (e.key === "Enter") {
    e.preventDefault();
    els.apiKey.dispatchEvent(new Event("change"));
  }
});

/** Reads the served model's name (GET /v1/models). */
async function loadModelName() {
  const res = await fetch("/v1/models", { headers: headers() });
  if (res.status === 401) {
    needApiKey(loadModelName);
    return;
  }
  if (res.ok) {
    modelName = (await res.json()).data[0].id;
    els.model.textContent = modelName;
    setStatus("ready");
  } else {
    setStatus(`GET /v1/models: ${res.status} ${(await errorText(res))}`);
  }
}

/** Polls /health until the model is loaded, then reads the model name. */
async function waitUntilReady() {
  for (;;) {
    try {
      const res = await fetch("/health");
      const body = await res.json();
      if (res.ok) break;
      if (body.status === "loading") setStatus(`loading model ${Math.floor(100 * (body.progress ?? 0))}%`);
      else setStatus(`unavailable: ${body.message ?? body.status}`);
    } catch {
      setStatus("cannot reach the server");
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  await loadModelName();
  els.send.disabled = false;
}

async function errorText(res) {
  try {
    const body = await res.json();
    return body.error?.message ?? JSON.stringify(body);
  } catch {
    return res.statusText;
  }
}

/** Yields each `data:` payload of an SSE response. */
async function* sseData(res) {
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split("\n")) if (line.startsWith("data: ")) yield line.slice(6);
    }
  }
}

async function send(userText) {
  history.push({ role: "user", content: userText });
  const asked = addMessage("user", userText);
  const reply = addMessage("assistant");
  reply.setAttribute("aria-busy", "true");
  const body = reply.querySelector(".text");
  const messages = els.system.value.trim() ? [{ role: "system", content: els.system.value.trim() }, ...history] : history;
  controller = new AbortController();
  els.send.disabled = true;
  els.stop.hidden = false;
  setStatus("generating…");
  const started = performance.now();
  let firstTokenAt = null;
  let finish = null;
  let usage = null;
  let text = "";
  let drawn = true;
  // Re-render the markdown at most once a frame, keeping the list at its end if it was there.
  const draw = () => {
    drawn = true;
    const follow = atBottom();
    body.innerHTML = renderMarkdown(text);
    if (follow) scrollToEnd();
  };
  let unauthorized = false;
  try {
    const res = await fetch("/v1/chat/completions", {
      method: "POST",
      headers: headers(),
      signal: controller.signal,
      body: JSON.stringify({
        model: modelName ?? undefined,
        messages,
        stream: true,
        stream_options: { include_usage: true },
        // Empty: the server applies the model's generation_config.json default (as vLLM does).
        temperature: els.temperature.value === "" ? undefined : Number(els.temperature.value),
        max_tokens: Number(els.maxTokens.value),
      }),
    });
    unauthorized = res.status === 401;
    if (!res.ok) throw new Error(`${res.status}: ${await errorText(res)}`);
    for await (const data of sseData(res)) {
      if (data === "[DONE]") break;
      const chunk = JSON.parse(data);
      if (chunk.error) throw new Error(chunk.error.message);
      if (chunk.usage) usage = chunk.usage;
      const choice = chunk.choices?.[0];
      if (!choice) continue;
      if (choice.delta?.content) {
        firstTokenAt ??= performance.now();
        text += choice.delta.content;
        if (drawn) {
          drawn = false;
          requestAnimationFrame(draw);
        }
      }
      if (choice.finish_reason) finish = choice.finish_reason;
    }
    draw();
    history.push({ role: "assistant", content: text });
    const seconds = (performance.now() - started) / 1000;
    const parts = [`finish: ${finish ?? "?"}`];
    if (usage) parts.push(`${usage.completion_tokens} tokens in ${seconds.toFixed(2)} s (${(usage.completion_tokens / seconds).toFixed(1)} tok/s)`);
    if (firstTokenAt !== null) parts.push(`first token ${((firstTokenAt - started) / 1000).toFixed(2)} s`);
    setMeta(reply, parts.join(" · "));
    reply.dataset.finish = finish ?? "";
    setStatus("ready");
  } catch (e) {
    draw();
    if (e.name === "AbortError") {
      history.push({ role: "assistant", content: text });
      setMeta(reply, "stopped");
      reply.dataset.finish = "stopped";
      setStatus("ready");
    } else {
      reply.classList.add("error");
      setMeta(reply, `error: ${e.message}`);
      reply.dataset.finish = "error";
      history.pop(); // the user turn that failed is not part of the conversation
      setStatus("error");
      if (unauthorized) {
        setMeta(reply, `error: ${e.message} Enter the API key in Settings; the message is sent again then.`);
        needApiKey(() => {
          asked.remove();
          reply.remove();
          return send(userText);
        });
      }
    }
  } finally {
    reply.removeAttribute("aria-busy");
    controller = null;
    els.send.disabled = false;
    els.stop.hidden = true;
    if (atBottom()) scrollToEnd();
  }
}

els.composer.addEventListener("submit", (e) => {
  e.preventDefault();
  const text = els.prompt.value.trim();
  if (!text || controller) return;
  els.prompt.value = "";
  void send(text);
});
els.prompt.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) {
    e.preventDefault();
    els.composer.requestSubmit();
  }
});
els.stop.addEventListener("click", () => controller?.abort());
els.clear.addEventListener("click", () => {
  controller?.abort();
  history = [];
  els.messages.replaceChildren();
});

els.send.disabled = true;
void waitUntilReady();

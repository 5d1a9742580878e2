/**
 * The hostile requests of issue #32 as bodies for the `stall` suite
 * (bench/suites/stall.ts): each once stalled /health or every stream for
 * seconds (the measurements in `was`); now each is refused by a
 * bound before any work, or does its work off the HTTP thread. Full size,
 * as the issue sent them (bodies stay under the 16 MiB body limit).
 * test/server/hostile-requests.test.ts holds the same cases, scaled down, to
 * their 400s and liveness rules.
 */
export interface HostileCase {
  name: string;
  path: string;
  /** Built when the case runs (some are 15 MB). */
  body: (model: string) => unknown;
  /** What the issue measured before the fix. */
  was: string;
}

const user = [{ role: "user", content: "hi" }];

export const HOSTILE_CASES: readonly HostileCase[] = [
  {
    name: "chat, 800k messages the template skips (14 MB)",
    path: "/v1/chat/completions",
    body: (model) => ({ model, messages: [...Array.from({ length: 800_000 }, () => ({ role: "system" })), ...user], max_tokens: 1 }),
    was: "1M messages: /health 28.6 s",
  },
  {
    name: "chat, 2048 messages (the bound), rendered",
    path: "/v1/chat/completions",
    body: (model) => ({ model, messages: Array.from({ length: 2048 }, (_, i) => ({ role: i % 2 === 0 ? "user" : "assistant", content: "ok" })), max_tokens: 1 }),
    was: "rendered on the HTTP thread: 40–140 ms",
  },
  {
    name: "/detokenize, 7M ids (14 MB)",
    path: "/detokenize",
    body: (model) => ({ model, tokens: new Array<number>(7_000_000).fill(5) }),
    was: "/health 3.3 s",
  },
  {
    name: "structural_tag, 5000 tags",
    path: "/v1/chat/completions",
    body: (model) => ({
      model,
      messages: user,
      max_tokens: 4,
      structured_outputs: { structural_tag: { type: "structural_tag", structures: Array.from({ length: 5000 }, (_, i) => ({ begin: `<f${i}>`, schema: { type: "object" }, end: `</f${i}>` })), triggers: ["<f"] } },
    }),
    was: "/health no answer in 120 s",
  },
  {
    name: "1000 tools, tool_choice required",
    path: "/v1/chat/completions",
    body: (model) => ({
      model,
      messages: user,
      max_tokens: 4,
      tool_choice: "required",
      tools: Array.from({ length: 1000 }, (_, i) => ({ type: "function", function: { name: `f${i}`, parameters: { type: "object", properties: { a: { type: "string" } } } } })),
    }),
    was: "engine busy ≥ 120 s",
  },
  {
    name: "logit_bias, 10^6 entries (13 MB)",
    path: "/v1/completions",
    body: (model) => ({ model, prompt: "x", max_tokens: 1, logit_bias: Object.fromEntries(Array.from({ length: 1_000_000 }, (_, i) => [String(i), -1])) }),
    was: "2.5–4.8 s",
  },
  {
    name: "n 128 × top_logprobs 20 × 900 tokens",
    path: "/v1/chat/completions",
    body: (model) => ({ model, messages: user, n: 128, max_tokens: 900, logprobs: true, top_logprobs: 20 }),
    was: "60 MB response: /health 4.5 s, RSS 1175 MiB",
  },
  {
    name: "n 8 × top_logprobs 20 × 390 tokens (at the bound), built",
    path: "/v1/chat/completions",
    body: (model) => ({ model, messages: user, n: 8, max_tokens: 390, ignore_eos: true, logprobs: true, top_logprobs: 20 }),
    was: "4.5 MB built at once: 300–700 ms (load 20)",
  },
  {
    name: "128 prompts × n 128",
    path: "/v1/completions",
    body: (model) => ({ model, prompt: Array.from({ length: 128 }, (_, i) => `p${i}`), n: 128, max_tokens: 4 }),
    was: "other streams stalled ~12 s",
  },
];

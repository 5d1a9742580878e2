// writeFullResponse (issue #32 item 2): a non-streamed response with logprobs
// written in slices of ~128 entries is byte for byte JSON.stringify(fullResponse(…)),
// for chat and completions (text_offset carried across slices, echo offsets),
// with 0, 1, one slice, one slice + 1 and 150 tokens per choice.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import type { TokenLogprobs } from "../../src/engine/engine.js";
import type { GenerationPlan } from "../../src/server/openai-request.js";
import { type ChoiceState, fullResponse } from "../../src/server/openai-response.js";
import { sliceTokens, writeFullResponse } from "../../src/server/response-writer.js";
import { Tokenizer } from "../../src/tokenizer/tokenizer.js";
import { testModelDir } from "./harness.js";

function logprobs(n: number, seed: number): TokenLogprobs[] {
  let s = seed;
  const next = (): number => (s = (s * 1103515245 + 12345) % 2147483648);
  return Array.from({ length: n }, () => ({ token: 3 + (next() % 30000), logprob: -(next() % 1000) / 97, top: Array.from({ length: 5 }, () => ({ token: 3 + (next() % 30000), logprob: -(next() % 1000) / 89 })) }));
}

async function written(plan: GenerationPlan, tok: Tokenizer, states: ChoiceState[]): Promise<string> {
  const server = createServer((_req, res) => void writeFullResponse(res, plan, tok, states));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  try {
    const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
    assert.equal(res.status, 200);
    return await res.text();
  } finally {
    server.close();
  }
}

test("a response with logprobs, written in slices, equals JSON.stringify(fullResponse) for chat and completions", async () => {
  const tok = Tokenizer.fromDir(testModelDir());
  const slice = sliceTokens(5);
  const lengths = [0, 1, slice, slice + 1, 150];
  for (const kind of ["chat", "completion"] as const) {
    for (const echo of kind === "chat" ? [false] : [false, true]) {
      const states: ChoiceState[] = lengths.map((n, i) => ({
        text: `choice ${i}`,
        numPromptTokens: 4,
        numOutputTokens: n,
        numCachedTokens: 0,
        finishReason: "length",
        stopReason: null,
        logprobs: logprobs(n, i + 1),
        group: 0,
      }));
      const prompts = lengths.map(() => ({ tokenIds: [1, 2], text: "the prompt", params: {} as never, group: 0, prefillAfter: null }));
      const plan = { kind, id: "x-1", model: "m", created: 7, prompts, logprobs: 5, echo, tools: null } as unknown as GenerationPlan;
      assert.equal(await written(plan, tok, states), JSON.stringify(fullResponse(plan, tok, states)), `${kind}, echo ${echo}`);
      const none = { ...plan, logprobs: null };
      assert.equal(await written(none, tok, states), JSON.stringify(fullResponse(none, tok, states)), `${kind} without logprobs`);
    }
  }
});

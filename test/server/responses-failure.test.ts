// A Responses request whose forward fails (faulty-loader.ts throws on any
// batch holding one word's token): a 500 naming the failure, or, streamed,
// response.failed with the error after response.created and
// response.in_progress; a failed response is not stored, and the server goes on.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type OpenAI from "openai";
import { Tokenizer } from "../../src/tokenizer/tokenizer.js";
import { MODEL, type ServerProcess, faultyModelArgs, post, startServer, testModelDir } from "./harness.js";

let server: ServerProcess;

before(async () => {
  const ids = Tokenizer.fromDir(testModelDir()).encode(" zebra", { addSpecialTokens: false });
  server = await startServer(faultyModelArgs(ids.at(-1)!));
});
after(async () => {
  assert.equal(await server.stop(), 0, server.stderr());
});

test("a failed forward: a 500, or a stream ending in response.failed with the error; nothing stored; the server goes on", async () => {
  const bad = await post(`${server.url}/v1/responses`, { model: MODEL, input: "a zebra", max_output_tokens: 4 });
  assert.equal(bad.status, 500, JSON.stringify(bad.body));
  assert.match(bad.body.error.message, /injected failure/);

  const stream = await server.openai.responses.create({ model: MODEL, input: "a zebra", max_output_tokens: 4, stream: true });
  const events: OpenAI.Responses.ResponseStreamEvent[] = [];
  for await (const e of stream) events.push(e);
  assert.deepEqual(events.map((e) => e.type), ["response.created", "response.in_progress", "response.failed"]);
  const failed = (events[2] as OpenAI.Responses.ResponseFailedEvent).response;
  assert.equal(failed.status, "failed");
  assert.match(failed.error!.message, /injected failure/);
  const got = await fetch(`${server.url}/v1/responses/${failed.id}`);
  assert.equal(got.status, 404, "a failed response is not stored");

  const ok = await server.openai.responses.create({ model: MODEL, input: "a horse", max_output_tokens: 3, temperature: 0 });
  assert.equal(ok.usage!.output_tokens, 3);
});

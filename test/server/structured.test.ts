// Structured output end to end: the official openai client against a real
// `kvflash serve` whose random-weight model only produces valid output because
// XGrammar masks its logits. JSON schemas (checked with ajv), regex, choice,
// EBNF, json_object, a KV pool small enough to preempt, and the 400s for
// schemas, regexes and grammars XGrammar refuses.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Ajv } from "ajv";
import { type ErrorBody, MODEL, type ServerProcess, metric, modelArgs, post, startServer } from "./harness.js";

let server: ServerProcess;
before(async () => {
  server = await startServer(modelArgs());
});
after(async () => {
  assert.equal(await server.stop(), 0, server.stderr());
});

const messages = [{ role: "user" as const, content: "Describe a person as JSON." }];

/** Nested objects, arrays, enums, integer ranges, required fields; strings and arrays bounded so a random model finishes. */
const PERSON = {
  type: "object",
  properties: {
    name: { type: "string", minLength: 1, maxLength: 6 },
    age: { type: "integer", minimum: 18, maximum: 99 },
    role: { enum: ["admin", "user", "guest"] },
    address: {
      type: "object",
      properties: { city: { type: "string", maxLength: 5 }, zip: { type: "integer", minimum: 10000, maximum: 99999 } },
      required: ["city", "zip"],
      additionalProperties: false,
    },
    tags: { type: "array", items: { type: "string", enum: ["a", "b", "c"] }, minItems: 1, maxItems: 3 },
    active: { type: "boolean" },
  },
  required: ["name", "age", "role", "address", "tags"],
  additionalProperties: false,
};

test("json_schema: 50 seeded requests all parse and validate against the schema (ajv)", async () => {
  const validate = new Ajv({ strict: false }).compile(PERSON);
  const replies = await Promise.all(
    Array.from({ length: 50 }, (_, seed) =>
      server.openai.chat.completions.create({
        model: MODEL,
        messages,
        max_tokens: 400,
        seed,
        temperature: 1,
        response_format: { type: "json_schema", json_schema: { name: "person", schema: PERSON, strict: true } },
      }),
    ),
  );
  const texts = new Set<string>();
  for (const [seed, r] of replies.entries()) {
    const choice = r.choices[0]!;
    assert.equal(choice.finish_reason, "stop", `seed ${seed}: the grammar completed (${choice.message.content})`);
    const value: unknown = JSON.parse(choice.message.content!);
    assert.ok(validate(value), `seed ${seed}: ${choice.message.content} fails the schema: ${JSON.stringify(validate.errors)}`);
    texts.add(choice.message.content!);
  }
  assert.ok(texts.size >= 45, `seeded samples differ (${texts.size} distinct of 50)`);
});

test("json_object, regex, choice and EBNF constraints hold, streamed or not", async () => {
  const json = await server.openai.chat.completions.create({ model: MODEL, messages, max_tokens: 300, seed: 7, response_format: { type: "json_object" } });
  if (json.choices[0]!.finish_reason === "stop") JSON.parse(json.choices[0]!.message.content!);
  for (let seed = 0; seed < 6; seed++) {
    const regex = await server.openai.completions.create({ model: MODEL, prompt: "Phone:", max_tokens: 40, seed, guided_regex: "\\(\\d{3}\\) \\d{3}-\\d{4}" } as never);
    assert.match(regex.choices[0]!.text, /^\(\d{3}\) \d{3}-\d{4}$/);
    assert.equal(regex.choices[0]!.finish_reason, "stop");
    const choice = await server.openai.chat.completions.create({ model: MODEL, messages, max_tokens: 20, seed, structured_outputs: { choice: ["yes", "no", "it depends"] } } as never);
    assert.ok(["yes", "no", "it depends"].includes(choice.choices[0]!.message.content!), choice.choices[0]!.message.content!);
    const ebnf = await server.openai.completions.create({ model: MODEL, prompt: "Sum:", max_tokens: 40, seed, guided_grammar: 'root ::= num " + " num " = " num\nnum ::= [1-9] [0-9]?' } as never);
    assert.match(ebnf.choices[0]!.text, /^[1-9][0-9]? \+ [1-9][0-9]? = [1-9][0-9]?$/);
  }
  const stream = await server.openai.completions.create({ model: MODEL, prompt: "Phone:", max_tokens: 40, seed: 3, stream: true, structured_outputs: { regex: "[a-z]{2,5}@[a-z]{2,5}\\.(com|org)" } } as never);
  let text = "";
  for await (const chunk of stream as unknown as AsyncIterable<{ choices: { text: string }[] }>) text += chunk.choices[0]?.text ?? "";
  assert.match(text, /^[a-z]{2,5}@[a-z]{2,5}\.(com|org)$/);
  const alone = await server.openai.completions.create({ model: MODEL, prompt: "Phone:", max_tokens: 40, seed: 3, structured_outputs: { regex: "[a-z]{2,5}@[a-z]{2,5}\\.(com|org)" } } as never);
  assert.equal(text, alone.choices[0]!.text, "streamed and non-streamed constrained outputs agree");
});

test("invalid schemas, regexes and grammars: a 400 naming the field and quoting XGrammar", async () => {
  const chat = `${server.url}/v1/chat/completions`;
  const comp = `${server.url}/v1/completions`;
  const cases: [string, unknown, string, RegExp][] = [
    [chat, { messages, response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "nope" } } } }, "response_format.json_schema.schema", /Unsupported type "nope"/],
    [chat, { messages, response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object", properties: 3 } } } }, "response_format.json_schema.schema", /properties must be an object/],
    [chat, { messages, response_format: { type: "json_schema", json_schema: "x" } }, "response_format.json_schema", /must be an object \{ name, schema, strict \}/],
    [comp, { prompt: "x", guided_regex: "[0-9" }, "guided_regex", /Regex parsing error at position 5: Unclosed '\['/],
    [comp, { prompt: "x", guided_json: "{not json" }, "guided_json", /the schema is not JSON/],
    [comp, { prompt: "x", structured_outputs: { grammar: 'root ::= "a" b' } }, "structured_outputs.grammar", /Rule "b" is not defined/],
    [comp, { prompt: "x", structured_outputs: { choice: [] } }, "structured_outputs.choice", /must be a non-empty array of strings/],
    [comp, { prompt: "x", structured_outputs: { xml: "a" } }, "structured_outputs.xml", /not supported/],
  ];
  for (const [url, body, param, message] of cases) {
    const r = await post<ErrorBody>(url, { model: MODEL, ...(body as object) });
    assert.equal(r.status, 400, JSON.stringify(r.body));
    assert.equal(r.body.error.param, param);
    assert.match(r.body.error.message, message);
  }
  const ok = await server.openai.completions.create({ model: MODEL, prompt: "x", max_tokens: 5, seed: 1, guided_choice: ["fine"] } as never);
  assert.equal(ok.choices[0]!.text, "fine", "the server goes on after the compiler aborted");
});

test("n=4: four distinct seeded choices (seed + index), the prompt prefilled once and counted once", async () => {
  const prompt = "The quick brown fox jumps over the lazy dog. ".repeat(6);
  const hits = async () => metric(await server.metrics(), "vllm:prefix_cache_hits_total");
  const before = await hits();
  const r = await server.openai.completions.create({ model: MODEL, prompt, max_tokens: 12, n: 4, seed: 40, temperature: 1 });
  const promptTokens = (await post<{ count: number }>(`${server.url}/tokenize`, { prompt })).body.count;
  // A prompt new to the cache: samples 1..3 waited for sample 0's prefill and reused every full 16-token block of it.
  assert.equal((await hits()) - before, 3 * Math.floor(promptTokens / 16) * 16, "prefix cache hits of the n=4 request");
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2, 3]);
  assert.equal(new Set(r.choices.map((c) => c.text)).size, 4, "four different samples");
  assert.equal(r.usage!.prompt_tokens, promptTokens, "usage counts the prompt once");
  assert.equal(r.usage!.completion_tokens, r.choices.length * 12);
  for (const [i, c] of r.choices.entries()) {
    const alone = await server.openai.completions.create({ model: MODEL, prompt, max_tokens: 12, seed: 40 + i, temperature: 1 });
    assert.equal(c.text, alone.choices[0]!.text, `choice ${i} is the seed ${40 + i} sample`);
  }

  const stream = await server.openai.chat.completions.create({ model: MODEL, messages, max_tokens: 8, n: 3, seed: 5, stream: true, stream_options: { include_usage: true } });
  const texts = ["", "", ""];
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) texts[c.index] += c.delta.content ?? "";
  }
  const full = await server.openai.chat.completions.create({ model: MODEL, messages, max_tokens: 8, n: 3, seed: 5 });
  assert.deepEqual(texts, full.choices.map((c) => c.message.content), "streamed choices carry their index");
  assert.equal(usage!.prompt_tokens, full.usage!.prompt_tokens);
});

test("a mixed batch (constrained, free, n > 1) gives each request its run-alone output", async () => {
  const schema = { type: "object", properties: { ok: { type: "boolean" }, n: { type: "integer", minimum: 0, maximum: 9 } }, required: ["ok", "n"] };
  const requests = [
    () => server.openai.chat.completions.create({ model: MODEL, messages, max_tokens: 60, seed: 11, response_format: { type: "json_schema", json_schema: { name: "s", schema } } }).then((r) => r.choices.map((c) => c.message.content)),
    () => server.openai.completions.create({ model: MODEL, prompt: "Once upon a time", max_tokens: 20, seed: 12 }).then((r) => r.choices.map((c) => c.text)),
    () => server.openai.completions.create({ model: MODEL, prompt: "Colours:", max_tokens: 10, seed: 13, n: 3 }).then((r) => r.choices.map((c) => c.text)),
    () => server.openai.completions.create({ model: MODEL, prompt: "Code:", max_tokens: 20, seed: 14, guided_regex: "[A-Z]{3}-[0-9]{4}" } as never).then((r) => r.choices.map((c) => c.text)),
    () => server.openai.chat.completions.create({ model: MODEL, messages, max_tokens: 16, temperature: 0 }).then((r) => r.choices.map((c) => c.message.content)),
  ];
  const alone: (string | null)[][] = [];
  for (const run of requests) alone.push(await run());
  const together = await Promise.all(requests.map((run) => run()));
  assert.deepEqual(together, alone);
  JSON.parse(alone[0]![0]!);
  assert.match(alone[3]![0]!, /^[A-Z]{3}-[0-9]{4}$/);
});

test("GET /v1/models/{id}: the openai client's models.retrieve; an unknown id is a 404", async () => {
  const m = await server.openai.models.retrieve(MODEL);
  assert.equal(m.id, MODEL);
  assert.equal(m.object, "model");
  const r = await fetch(`${server.url}/v1/models/nope`);
  assert.equal(r.status, 404);
  assert.equal(((await r.json()) as ErrorBody).error.code, "model_not_found");
});

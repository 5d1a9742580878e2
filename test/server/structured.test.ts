// Structured output end to end: the official openai client against a real
// `kvflash serve` whose random-weight model only produces valid output because
// XGrammar masks its logits. JSON schemas (checked with ajv), regex, choice,
// EBNF, json_object, a KV pool small enough to preempt, and the 400s for
// schemas, regexes and grammars XGrammar refuses.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Ajv } from "ajv";
import { type ErrorBody, MODEL, type ServerProcess, modelArgs, post, startServer } from "./harness.js";

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

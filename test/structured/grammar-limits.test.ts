// The size limits checked before any grammar compiles (structured/grammar-limits.ts):
// each limit passes at its value and fails one past it, naming the sub-field;
// schema data (enum values, defaults) is not mistaken for schema keywords; real
// schemas pass; EBNF strings and character classes do not count as groups.
import assert from "node:assert/strict";
import { test } from "node:test";
import { GRAMMAR_LIMITS as L, checkGrammarLimits, groupDepth } from "../../src/structured/grammar-limits.js";
import type { GrammarSpec } from "../../src/structured/grammar-spec.js";

const json = (schema: unknown): GrammarSpec => ({ type: "json", schema: JSON.stringify(schema) });
/** `d` objects nested through `properties`: JSON depth 2d + 1. */
const nest = (d: number): object => {
  let s: object = { type: "string" };
  for (let i = 0; i < d; i++) s = { type: "object", properties: { a: s } };
  return s;
};
const props = (n: number) => ({ type: "object", properties: Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, { type: "integer" }])) });

test("schema depth: 63 JSON levels pass, 65 fail naming the path (cut to 80 characters)", () => {
  assert.equal(checkGrammarLimits(json(nest(31))), null);
  const v = checkGrammarLimits(json(nest(32)))!;
  assert.match(v.message, new RegExp(`nests deeper than ${L.schemaDepth} levels`));
  assert.ok(v.path.startsWith(".properties.a.properties.a") && v.path.endsWith("…") && v.path.length === 81, v.path);
  // arrays count too: data nested in an enum value as well
  assert.match(checkGrammarLimits(json({ enum: [JSON.parse("[".repeat(70) + "]".repeat(70))] }))!.message, /nests deeper/);
});

test("properties, enum values and characters, $refs: at the limit pass, one past fails naming the keyword", () => {
  assert.equal(checkGrammarLimits(json(props(L.properties))), null);
  assert.deepEqual(checkGrammarLimits(json({ anyOf: [props(L.properties - 1), props(2)] })), { path: ".anyOf[0].properties", message: `has more than ${L.properties} properties in all, counted over every object of the schema` });
  const values = (n: number) => Array.from({ length: n }, (_, i) => `v${i}`);
  assert.equal(checkGrammarLimits(json({ enum: values(L.enumValues) })), null);
  assert.equal(checkGrammarLimits(json({ enum: values(L.enumValues + 1) }))!.path, ".enum");
  assert.match(checkGrammarLimits(json({ enum: ["x".repeat(L.enumChars + 1)] }))!.message, /characters of enum/);
  const refs = (n: number) => ({ $defs: { a: { type: "string" } }, anyOf: Array.from({ length: n }, () => ({ $ref: "#/$defs/a" })) });
  assert.equal(checkGrammarLimits(json(refs(L.refs))), null);
  assert.match(checkGrammarLimits(json(refs(L.refs + 1)))!.message, /more than 128 \$refs/);
  assert.equal(checkGrammarLimits(json({ type: "string", pattern: "a".repeat(L.patternLength) })), null);
  assert.deepEqual(checkGrammarLimits(json({ properties: { x: { type: "string", pattern: "a".repeat(L.patternLength + 1) } } })), { path: ".properties.x.pattern", message: "is 1001 characters long; at most 1000" });
});

test("data is not schema: enum values, defaults and property names are not counted as keywords", () => {
  // An enum of objects with `properties` and `$ref` keys: values, not schemas.
  const value = { properties: Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`k${i}`, 1])), $ref: "x" };
  assert.equal(checkGrammarLimits(json({ enum: [value], default: value })), null);
  // A property named "properties" is one property.
  assert.equal(checkGrammarLimits(json({ type: "object", properties: { properties: { type: "string" }, enum: { type: "integer" } } })), null);
});

test("real schemas pass: nested objects, arrays, $defs with a recursive $ref, patterns", () => {
  const person = {
    $defs: { node: { type: "object", properties: { value: { type: "integer" }, children: { type: "array", items: { $ref: "#/$defs/node" } } } } },
    type: "object",
    properties: {
      name: { type: "string", minLength: 1, maxLength: 6 },
      email: { type: "string", pattern: "^[a-z0-9._%+-]+@[a-z0-9.-]+\\.[a-z]{2,}$" },
      role: { enum: ["admin", "user", "guest"] },
      address: { type: "object", properties: { city: { type: "string" }, zip: { type: "integer" } }, required: ["city", "zip"] },
      tree: { $ref: "#/$defs/node" },
    },
    required: ["name", "role"],
  };
  assert.equal(checkGrammarLimits(json(person)), null);
  assert.equal(checkGrammarLimits({ type: "json", schema: null }), null);
  assert.deepEqual(checkGrammarLimits({ type: "json", schema: "{not json" })?.path, "");
});

test("EBNF and regexes: size, and group nesting outside strings and character classes", () => {
  assert.equal(groupDepth('root ::= "((((((" [(((] ("a" ("b"))', true), 2);
  assert.equal(groupDepth("\\(\\((a)[(]", false), 1);
  const nested = (d: number) => `root ::= ${"(".repeat(d)}"a"${")".repeat(d)}`;
  assert.equal(checkGrammarLimits({ type: "ebnf", grammar: nested(L.grammarDepth) }), null);
  assert.match(checkGrammarLimits({ type: "ebnf", grammar: nested(L.grammarDepth + 1) })!.message, /nests groups 65 deep; at most 64/);
  assert.match(checkGrammarLimits({ type: "ebnf", grammar: `root ::= "${"a".repeat(L.grammarChars)}"` })!.message, /characters long; at most 65536/);
  assert.match(checkGrammarLimits({ type: "regex", pattern: "(".repeat(65) + ")".repeat(65) })!.message, /nests groups 65 deep/);
  assert.match(checkGrammarLimits({ type: "choice", choices: Array.from({ length: 1001 }, String) })!.message, /1001 choices; at most 1000/);
});

test("tools: at most 128 functions for a call grammar, 128 tags in a structural tag", () => {
  const call = (n: number): GrammarSpec => ({ type: "tool_calls", format: "hermes", parallel: true, schema: JSON.stringify({ anyOf: Array.from({ length: n }, (_, i) => ({ type: "object", properties: { name: { enum: [`f${i}`] } } })) }) });
  assert.equal(checkGrammarLimits(call(L.tags)), null);
  assert.match(checkGrammarLimits(call(L.tags + 1))!.message, /offers 129 functions to call; at most 128/);
  const tag = (n: number): GrammarSpec => ({ type: "structural_tag", tag: JSON.stringify({ type: "structural_tag", format: { type: "triggered_tags", triggers: ["<t>"], tags: Array.from({ length: n }, (_, i) => ({ type: "tag", begin: `<t>${i}`, content: { type: "json_schema", json_schema: { type: "object" } }, end: "</t>" })) } }) });
  assert.equal(checkGrammarLimits(tag(L.tags)), null);
  assert.match(checkGrammarLimits(tag(L.tags + 1))!.message, /more than 128 tags/);
});

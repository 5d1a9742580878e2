// The partial-JSON span reader the streaming tool parsers share: exact spans
// on whole values, every prefix of a value read without error and its string
// decoded to a prefix of the whole string, and text that is not JSON refused.
import assert from "node:assert/strict";
import { test } from "node:test";
import { decodeStringSpan, partialTagAtEnd, readJsonPrefix, spanText } from "../../src/server/partial-text.js";

test("whole values: spans of objects, arrays, strings and scalars, keys decoded", () => {
  const text = ' {"a\\u0062": [1, -2.5e3, true, null], "s": "x\\"y"} tail';
  const span = readJsonPrefix(text)!;
  assert.equal(span.type, "object");
  assert.equal(span.end, text.indexOf(" tail"));
  if (span.type !== "object") return;
  assert.deepEqual(span.members.map((m) => m.key), ["ab", "s"]);
  const arr = span.members[0]!.value!;
  assert.equal(spanText(text, arr), "[1, -2.5e3, true, null]");
  const s = span.members[1]!.value!;
  assert.ok(s.type === "string");
  assert.equal(decodeStringSpan(text, s), 'x"y');
});

test("every prefix reads; a string's decoded prefix leads the whole string; a value is complete only at its end", () => {
  const text = '{"k": ["caf\\u00e9 \\\\ \\n \\"q\\"", {"n": 12.5, "t": [true, false, null]}], "z": ""}';
  const whole = JSON.parse(text) as { k: [string] };
  for (let n = 1; n <= text.length; n++) {
    const span = readJsonPrefix(text.slice(0, n));
    assert.ok(span !== null && span.type === "object", `prefix ${n}`);
    assert.equal(span.end, n === text.length ? n : null, `prefix ${n}: end`);
    const k = span.members[0]?.value;
    if (k?.type === "array" && k.items[0]?.type === "string") {
      const s = decodeStringSpan(text.slice(0, n), k.items[0]);
      assert.ok(whole.k[0].startsWith(s), `prefix ${n}: ${JSON.stringify(s)}`);
    }
  }
});

test("not JSON: null; partial tags at the end of text", () => {
  for (const bad of ["{a: 1}", '{"a" 1}', "[1 2]", '"\\x"', "tru e", "{}}".slice(0, 0) + "nope", '{"a": 1,]']) assert.equal(readJsonPrefix(bad), null, bad);
  assert.equal(readJsonPrefix("   "), null);
  assert.equal(partialTagAtEnd("text <tool_c", "<tool_call>"), 7);
  assert.equal(partialTagAtEnd("text <tool_call>", "<tool_call>"), 0, "a whole tag is not partial");
  assert.equal(partialTagAtEnd("text", "<tool_call>"), 0);
});

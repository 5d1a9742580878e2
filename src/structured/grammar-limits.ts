/**
 * Size limits on a constraint, checked before anything compiles it (issue #32
 * item 1). XGrammar converts JSON schemas, regexes and EBNF by recursion on a
 * fixed wasm stack and builds its token-mask cache per grammar state, so past
 * some size a grammar traps (a schema 60 objects deep reads out of bounds) or
 * compiles for minutes (5000 properties). The compile sandbox
 * (grammar-sandbox.ts) bounds what slips through; these limits make the
 * common attacks a clear 400 naming the field, in time linear in the request.
 *
 * The values come from what real schemas use:
 *   - OpenAI's structured outputs allow 10 levels of object nesting (about 20
 *     JSON levels: `properties` → name → schema), 1000 enum values in all and
 *     120,000 characters of enum / const text; OpenAI accepts 128 tools.
 *   - vLLM's tests (tests/v1/entrypoints/llm/test_struct_output_generate.py)
 *     and XGrammar's (tests/python/test_json_schema_converter.py) nest at most
 *     ~8 levels, use ≤ 30 properties, patterns under 100 characters and
 *     grammars of a few KB.
 * Each limit sits well above those and below where XGrammar fails here: a
 * 50-object nesting (101 JSON levels) compiles, 60 (121) traps; 200
 * optional properties compile in ~2 s against a 4k vocabulary, 500 in ~14 s.
 */
import type { GrammarSpec } from "./grammar-spec.js";

export const GRAMMAR_LIMITS = {
  /** JSON nesting of a schema (or structural tag) document, objects and arrays both (~32 object levels). */
  schemaDepth: 64,
  /** Entries of every `properties` map in one schema, together. */
  properties: 1000,
  /** Values of every `enum` (and `const`) in one schema, together; also choices. OpenAI: 1000. */
  enumValues: 1000,
  /** Characters of every enum / const / choice string, together. OpenAI: 120,000. */
  enumChars: 120_000,
  /** Characters of one regex: a `pattern`, a `patternProperties` key, or a regex constraint. */
  patternLength: 1000,
  /** `$ref`s in one schema (a chain of 200 overflows XGrammar's stack here; the sandbox catches what is left). */
  refs: 128,
  /** Characters of an EBNF grammar. */
  grammarChars: 64 * 1024,
  /** Nesting of ( and [ groups in an EBNF grammar (or a regex). */
  grammarDepth: 64,
  /** Tags of a structural tag, or functions a tool call may name. OpenAI accepts 128 tools. */
  tags: 128,
  /** Characters of a schema's or structural tag's JSON text (the engine parses it again to key its cache). */
  schemaChars: 2 ** 20,
} as const;

/** The first limit `spec` breaks: the sub-field at fault (appended to the request's field) and the message; null when within all. */
export interface LimitViolation {
  /** Path below the request's field, e.g. ".properties.a.enum" ("" for the field itself). */
  path: string;
  message: string;
}

const L = GRAMMAR_LIMITS;
const MAP_KEYWORDS = new Set(["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"]);
const DATA_KEYWORDS = new Set(["enum", "const", "default", "examples"]);

interface Counts {
  properties: number;
  enumValues: number;
  enumChars: number;
  refs: number;
  tags: number;
}

/** Where a value sits: a schema (keys are keywords), a map of schemas (keys are names), or plain data. */
type Kind = "schema" | "map" | "data";

function countData(v: unknown, c: Counts): void {
  c.enumValues++;
  if (typeof v === "string") c.enumChars += v.length;
  else if (v !== null && typeof v === "object") c.enumChars += 16; // structured values: counted by their leaves below
}

/**
 * Walks a JSON document (a schema, or a structural tag whose formats hold
 * schemas) with an explicit stack: O(size), no recursion. Counts what the
 * limits name and returns the first violation.
 */
function walkJson(root: unknown): LimitViolation | null {
  const c: Counts = { properties: 0, enumValues: 0, enumChars: 0, refs: 0, tags: 0 };
  const stack: { v: unknown; depth: number; kind: Kind; path: string }[] = [{ v: root, depth: 0, kind: "schema", path: "" }];
  while (stack.length > 0) {
    const { v, depth, kind, path } = stack.pop()!;
    if (v === null || typeof v !== "object") continue;
    if (depth + 1 > L.schemaDepth) return { path, message: `nests deeper than ${L.schemaDepth} levels (objects and arrays); simplify the schema` };
    if (Array.isArray(v)) {
      v.forEach((x, i) => stack.push({ v: x, depth: depth + 1, kind: kind === "data" ? "data" : "schema", path: `${path}[${i}]` }));
      continue;
    }
    const o = v as Record<string, unknown>;
    if (kind === "schema") {
      const props = o["properties"];
      if (props !== null && typeof props === "object" && !Array.isArray(props)) {
        c.properties += Object.keys(props).length;
        if (c.properties > L.properties) return { path: `${path}.properties`, message: `has more than ${L.properties} properties in all, counted over every object of the schema` };
      }
      const en = o["enum"];
      if (Array.isArray(en)) for (const x of en) countData(x, c);
      if ("const" in o) countData(o["const"], c);
      if (c.enumValues > L.enumValues) return { path: `${path}.enum`, message: `has more than ${L.enumValues} enum / const values in all` };
      if (c.enumChars > L.enumChars) return { path: `${path}.enum`, message: `has more than ${L.enumChars} characters of enum / const values in all` };
      const pattern = o["pattern"];
      if (typeof pattern === "string" && pattern.length > L.patternLength) return { path: `${path}.pattern`, message: `is ${pattern.length} characters long; at most ${L.patternLength}` };
      if (typeof o["$ref"] === "string" && ++c.refs > L.refs) return { path: `${path}.$ref`, message: `has more than ${L.refs} $refs` };
      if (typeof o["begin"] === "string" && ++c.tags > L.tags) return { path, message: `has more than ${L.tags} tags` };
      const pp = o["patternProperties"];
      if (pp !== null && typeof pp === "object") {
        const long = Object.keys(pp).find((k) => k.length > L.patternLength);
        if (long !== undefined) return { path: `${path}.patternProperties`, message: `has a pattern ${long.length} characters long; at most ${L.patternLength}` };
      }
    }
    for (const [k, x] of Object.entries(o)) {
      const childKind: Kind = kind === "data" || (kind === "schema" && DATA_KEYWORDS.has(k)) ? "data" : kind === "schema" && MAP_KEYWORDS.has(k) ? "map" : "schema";
      stack.push({ v: x, depth: depth + 1, kind: childKind, path: `${path}.${k}` });
    }
  }
  return null;
}

/**
 * Group nesting of an EBNF grammar or a regex: ( and [ outside string
 * literals and character classes, escapes skipped. O(length).
 */
export function groupDepth(text: string, ebnf: boolean): number {
  let depth = 0;
  let max = 0;
  let quote = false;
  let cls = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (ch === "\\") {
      i++;
      continue;
    }
    if (quote) {
      if (ch === '"') quote = false;
    } else if (cls) {
      if (ch === "]") cls = false;
    } else if (ebnf && ch === '"') quote = true;
    else if (ch === "[") cls = true;
    else if (ch === "(") max = Math.max(max, ++depth);
    else if (ch === ")") depth = Math.max(0, depth - 1);
  }
  return max;
}

function checkPattern(pattern: string, ebnf: boolean): LimitViolation | null {
  const max = ebnf ? L.grammarChars : L.patternLength;
  if (pattern.length > max) return { path: "", message: `is ${pattern.length} characters long; at most ${max}` };
  const depth = groupDepth(pattern, ebnf);
  if (depth > L.grammarDepth) return { path: "", message: `nests groups ${depth} deep; at most ${L.grammarDepth}` };
  return null;
}

function checkChoices(choices: readonly string[]): LimitViolation | null {
  if (choices.length > L.enumValues) return { path: "", message: `has ${choices.length} choices; at most ${L.enumValues}` };
  const chars = choices.reduce((n, s) => n + s.length, 0);
  if (chars > L.enumChars) return { path: "", message: `has ${chars} characters of choices; at most ${L.enumChars}` };
  return null;
}

function parseJson(text: string): { value: unknown } | LimitViolation {
  try {
    return { value: JSON.parse(text) as unknown };
  } catch (e) {
    return { path: "", message: `is not JSON: ${(e as Error).message}` };
  }
}

/** Longest sub-field path named in an error (a 60-level path is cut, not echoed whole). */
const MAX_PATH_CHARS = 80;

/**
 * The first limit `spec` breaks (or its JSON does not parse), else null.
 * `parsed`: the spec's JSON already parsed (the request body's own value), so a large schema is not parsed twice.
 */
export function checkGrammarLimits(spec: GrammarSpec, parsed?: unknown): LimitViolation | null {
  const v = firstViolation(spec, parsed);
  return v === null || v.path.length <= MAX_PATH_CHARS ? v : { ...v, path: `${v.path.slice(0, MAX_PATH_CHARS)}…` };
}

function firstViolation(spec: GrammarSpec, given: unknown): LimitViolation | null {
  switch (spec.type) {
    case "regex":
      return checkPattern(spec.pattern, false);
    case "ebnf":
      return checkPattern(spec.grammar, true);
    case "choice":
      return checkChoices(spec.choices);
    case "json":
    case "structural_tag":
    case "tool_calls": {
      const text = spec.type === "json" ? spec.schema : spec.type === "structural_tag" ? spec.tag : spec.schema;
      if (text === null) return null;
      if (text.length > L.schemaChars) return { path: "", message: `is ${text.length} characters of JSON; at most ${L.schemaChars}` };
      const parsed = given === undefined ? parseJson(text) : { value: given };
      if (!("value" in parsed)) return parsed;
      if (spec.type === "tool_calls") {
        const any = (parsed.value as { anyOf?: unknown } | null)?.anyOf;
        if (Array.isArray(any) && any.length > L.tags) return { path: "", message: `offers ${any.length} functions to call; at most ${L.tags}` };
      }
      return walkJson(parsed.value);
    }
  }
}

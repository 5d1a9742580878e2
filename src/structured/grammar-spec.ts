/**
 * What a constrained request asks for, as plain data that crosses from the
 * HTTP thread to the engine worker (vLLM's StructuredOutputsParams: json,
 * regex, choice, grammar, structural_tag), its canonical text (the grammar
 * cache's key), and how each kind becomes an XGrammar grammar — parsed only
 * (the HTTP thread's check, grammar-check.ts) or compiled against the model's
 * vocabulary (the engine worker, grammar-backend.ts).
 */
import type { XGrammar, XGrammarCompiledGrammar, XGrammarCompiler, XGrammarGrammar } from "./xgrammar.js";

export type GrammarSpec =
  /** Any JSON value when schema is null (response_format json_object), else a JSON schema's text. */
  | { type: "json"; schema: string | null }
  | { type: "regex"; pattern: string }
  /** Exactly one of the strings. */
  | { type: "choice"; choices: string[] }
  /** XGrammar EBNF (GBNF-like), root rule `root`. */
  | { type: "ebnf"; grammar: string }
  /** An XGrammar structural tag, as JSON text (tool calling's triggered tags). */
  | { type: "structural_tag"; tag: string }
  /**
   * Tool calls only (tool_choice "required" or a named function): `schema` is
   * one call's JSON schema ({name, arguments | parameters}); hermes wraps each
   * call in <tool_call> tags, one or (parallel) several; llama3_json is one bare
   * call; mistral is [TOOL_CALLS] and a JSON array of one or (parallel) several.
   */
  | { type: "tool_calls"; format: "hermes" | "llama3_json" | "mistral"; schema: string; parallel: boolean };

/**
 * JSON output: any whitespace between elements (vLLM's default), bounded per gap
 * so a model that keeps choosing whitespace still has to move on.
 */
export const JSON_MAX_WHITESPACE = 4;

/** JSON text with object keys sorted at every level: equal schemas, equal text. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/** The grammar cache's key: the kind and its canonical text. */
export function grammarKey(spec: GrammarSpec): string {
  switch (spec.type) {
    case "json":
      return spec.schema === null ? "json" : `json:${canonicalJson(JSON.parse(spec.schema))}`;
    case "regex":
      return `regex:${spec.pattern}`;
    case "choice":
      return `choice:${JSON.stringify(spec.choices)}`;
    case "ebnf":
      return `ebnf:${spec.grammar}`;
    case "structural_tag":
      return `structural_tag:${canonicalJson(JSON.parse(spec.tag))}`;
    case "tool_calls":
      return `tool_calls:${spec.format}:${spec.parallel}:${canonicalJson(JSON.parse(spec.schema))}`;
  }
}

/** The root rule of toolCallsEbnf's grammar. */
const TOOL_CALLS_ROOT = "kvflash_tool_calls";

/** Tool calls as EBNF: the call schema's grammar (root `root`) inside the format's markup, root TOOL_CALLS_ROOT. */
async function toolCallsEbnf(xg: XGrammar, spec: Extract<GrammarSpec, { type: "tool_calls" }>): Promise<string> {
  const call = await jsonSchemaEbnf(xg, spec.schema);
  if (spec.format === "llama3_json") return [call, `${TOOL_CALLS_ROOT} ::= root`].join("\n");
  if (spec.format === "mistral") return [call, `${TOOL_CALLS_ROOT} ::= "[TOOL_CALLS][" root${spec.parallel ? ' (", " root)*' : ""} "]"`].join("\n");
  const one = String.raw`"<tool_call>\n" root "\n</tool_call>"`;
  const more = spec.parallel ? String.raw` ("\n" ${one})*` : "";
  return [call, `${TOOL_CALLS_ROOT} ::= ${one}${more}`].join("\n");
}

/** choice → `root ::= "a" | "b"`; JSON string escapes are XGrammar EBNF escapes too. */
export function choiceEbnf(choices: readonly string[]): string {
  return `root ::= ${choices.map((c) => JSON.stringify(c)).join(" | ")}`;
}

/** A regex as a structural tag (web-xgrammar has no compileRegex; the regex format is the same converter). */
export function regexTag(pattern: string): string {
  return JSON.stringify({ type: "structural_tag", format: { type: "regex", pattern } });
}

/**
 * A JSON schema's EBNF (XGrammar's converter), with one upstream bug fixed:
 * web-xgrammar 0.1.27 writes the characters of length-bounded strings
 * (minLength / maxLength) as "anything but quote, backslash, CR, LF", which
 * lets raw control characters into a JSON string (invalid JSON); unbounded
 * strings also exclude U+0000–U+001F, as JSON requires. We give both the latter.
 */
export async function jsonSchemaEbnf(xg: XGrammar, schema: string): Promise<string> {
  const ebnf = await xg.Testings._jsonSchemaToEBNF(schema, true, undefined, undefined, true, JSON_MAX_WHITESPACE);
  return ebnf.replace(/\[\^\\?"\\\\\\r\\n\]/g, String.raw`[^\0-\x1f"\\\r\n]`);
}

/** Parses the spec into an XGrammar Grammar (no vocabulary): the syntax check. */
export async function parseGrammar(xg: XGrammar, spec: GrammarSpec): Promise<XGrammarGrammar> {
  const G = xg.Grammar;
  switch (spec.type) {
    case "json":
      return spec.schema === null ? G.builtinJSONGrammar() : G.fromEBNF(await jsonSchemaEbnf(xg, spec.schema));
    case "regex":
      return G.fromStructuralTag(regexTag(spec.pattern));
    case "choice":
      return G.fromEBNF(choiceEbnf(spec.choices));
    case "ebnf":
      return G.fromEBNF(spec.grammar);
    case "structural_tag":
      return G.fromStructuralTag(spec.tag);
    case "tool_calls":
      return G.fromEBNF(await toolCallsEbnf(xg, spec), TOOL_CALLS_ROOT);
  }
}

/** Compiles the spec against the compiler's vocabulary (~100 ms for a small schema and a 32k vocabulary). */
export async function compileGrammar(xg: XGrammar, compiler: XGrammarCompiler, spec: GrammarSpec): Promise<XGrammarCompiledGrammar> {
  switch (spec.type) {
    case "json":
      return spec.schema === null ? compiler.compileBuiltinJSONGrammar() : compiler.compileGrammar(await jsonSchemaEbnf(xg, spec.schema));
    case "regex":
      return compiler.compileStructuralTag(regexTag(spec.pattern));
    case "choice":
      return compiler.compileGrammar(choiceEbnf(spec.choices));
    case "ebnf":
      return compiler.compileGrammar(spec.grammar);
    case "structural_tag":
      return compiler.compileStructuralTag(spec.tag);
    case "tool_calls":
      return compiler.compileGrammar(await toolCallsEbnf(xg, spec), TOOL_CALLS_ROOT);
  }
}

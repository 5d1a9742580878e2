/**
 * The structured-output fields of an OpenAI request → one GrammarSpec, with the
 * field it came from (vLLM's serving_engine: response_format, structured_outputs,
 * and the older guided_* fields):
 *
 *   response_format  {"type": "text"} | {"type": "json_object"}
 *                    | {"type": "json_schema", "json_schema": {name, schema, strict}}
 *   structured_outputs  {json | regex | choice | grammar | json_object | structural_tag}
 *   guided_json, guided_regex, guided_choice, guided_grammar
 *
 * At most one constraint per request. Shapes and size limits are checked
 * here; whether the schema, regex or grammar means anything is XGrammar's
 * call, in the engine's compile sandbox (grammarRejection): either way a bad
 * one is a 400 naming the field.
 */
import { show } from "../errors.js";
import { checkGrammar } from "../structured/grammar-check.js";
import type { GrammarSpec } from "../structured/grammar-spec.js";
import { type HttpError, badRequest } from "./errors.js";
import { type Fields, type Json, isObject } from "./fields.js";

export interface GrammarRequest {
  spec: GrammarSpec;
  /** The request field it came from, e.g. "response_format.json_schema.schema". */
  param: string;
  /** The schema as the body held it (an object), when it was not text: the limits walk it instead of parsing the text again. */
  parsed?: unknown;
}

function schemaText(param: string, v: unknown): string {
  if (typeof v === "string") return v;
  if (isObject(v) || typeof v === "boolean") return JSON.stringify(v);
  throw badRequest(param, `${param} must be a JSON schema (an object or its JSON text), got ${show(v)}`);
}

function text(param: string, v: unknown): string {
  if (typeof v !== "string" || v.length === 0) throw badRequest(param, `${param} must be a non-empty string, got ${show(v)}`);
  return v;
}

function choices(param: string, v: unknown): string[] {
  if (!Array.isArray(v) || v.length === 0 || v.some((c) => typeof c !== "string")) throw badRequest(param, `${param} must be a non-empty array of strings, got ${show(v)}`);
  return v as string[];
}

/** A JSON-schema constraint from a field that holds a schema object or its text. */
function jsonRequest(param: string, v: unknown): GrammarRequest {
  return { spec: { type: "json", schema: schemaText(param, v) }, param, ...(typeof v === "string" ? {} : { parsed: v }) };
}

/**
 * json_object (OpenAI: "a valid JSON object"): an object schema, so the top
 * level cannot be an array, string or number as XGrammar's builtin JSON
 * grammar would allow.
 */
const JSON_OBJECT: GrammarSpec = { type: "json", schema: '{"type":"object"}' };

function fromResponseFormat(format: Json): GrammarRequest | null {
  const type = format["type"];
  if (type === "text") return null;
  if (type === "json_object") return { spec: JSON_OBJECT, param: "response_format" };
  if (type === "json_schema") {
    const js = format["json_schema"];
    if (!isObject(js)) throw badRequest("response_format.json_schema", `response_format.json_schema must be an object { name, schema, strict }, got ${show(js)}`);
    if (js["schema"] === undefined || js["schema"] === null) return { spec: { type: "json", schema: null }, param: "response_format.json_schema" };
    return jsonRequest("response_format.json_schema.schema", js["schema"]);
  }
  throw badRequest("response_format.type", `response_format.type must be "text", "json_object" or "json_schema", got ${show(type)}`);
}

/** One named member of structured_outputs (or a guided_* field) → its spec. */
function fromMember(name: string, v: unknown, param: string): GrammarRequest | null {
  switch (name) {
    case "json":
      return jsonRequest(param, v);
    case "json_object":
      if (v !== true) throw badRequest(param, `${param} must be true, got ${show(v)}`);
      return { spec: JSON_OBJECT, param };
    case "regex":
      return { spec: { type: "regex", pattern: text(param, v) }, param };
    case "choice":
      return { spec: { type: "choice", choices: choices(param, v) }, param };
    case "grammar":
      return { spec: { type: "ebnf", grammar: text(param, v) }, param };
    case "structural_tag":
      return { spec: { type: "structural_tag", tag: typeof v === "string" ? v : JSON.stringify(v) }, param };
    default:
      return null;
  }
}

const STRUCTURED_MEMBERS = ["json", "regex", "choice", "grammar", "json_object", "structural_tag"];
const GUIDED = ["guided_json", "guided_regex", "guided_choice", "guided_grammar"];

/** The request's constraint, or null for free text. Throws a 400 for a malformed field or two constraints at once. */
export function parseGrammarFields(f: Fields): GrammarRequest | null {
  const found: GrammarRequest[] = [];
  const format = f.object("response_format");
  if (format !== undefined) {
    const g = fromResponseFormat(format);
    if (g !== null) found.push(g);
  }
  const so = f.object("structured_outputs");
  if (so !== undefined) {
    for (const [name, v] of Object.entries(so)) {
      if (v === undefined || v === null || v === false) continue;
      if (!STRUCTURED_MEMBERS.includes(name)) {
        if (name === "disable_any_whitespace" || name === "disable_fallback" || name === "disable_additional_properties" || name === "whitespace_pattern") continue;
        throw badRequest(`structured_outputs.${name}`, `structured_outputs.${name} is not supported: use one of ${STRUCTURED_MEMBERS.join(", ")}`);
      }
      found.push(fromMember(name, v, `structured_outputs.${name}`)!);
    }
  }
  for (const name of GUIDED) {
    const v = f.raw(name);
    if (v !== undefined) found.push(fromMember(name.slice("guided_".length), v, name)!);
  }
  if (found.length > 1) throw badRequest(found[1]!.param, `only one structured-output constraint per request, got ${found.map((g) => g.param).join(" and ")}`);
  return found[0] ?? null;
}

/** The constraint's size limits and JSON syntax: a 400 naming the field (its message names the sub-field at fault) before any work. */
export function checkRequestGrammar(g: GrammarRequest | null): void {
  if (g === null) return;
  const over = checkGrammar(g.spec, g.parsed);
  if (over !== null) throw badRequest(g.param, `${g.param}${over.path} ${over.message}`);
}

/**
 * The engine's refusal of a constraint (param "grammar" or "grammar.<path>":
 * the sandbox's compile failed, ran out of budget, or the grammar admits
 * nothing) as a 400 naming the request's field.
 */
export function grammarRejection(g: GrammarRequest, param: string, message: string): HttpError {
  const path = param.slice("grammar".length);
  return badRequest(g.param, path === "" ? `${g.param} is invalid: ${message}` : `${g.param}${path} ${message}`);
}

/**
 * The HTTP thread's syntax check of a constrained request, so a bad JSON
 * schema, regex or grammar is a 400 that quotes XGrammar's own message before
 * anything reaches the engine. Parsing needs no vocabulary (it is the cheap
 * half of compiling); the engine worker compiles what passes. The check runs
 * on a private XGrammar instance, loaded on first use: a compiler abort there
 * cannot disturb the engine's.
 */
import { type GrammarSpec, parseGrammar } from "./grammar-spec.js";
import { type XGrammar, loadXGrammar } from "./xgrammar.js";

let instance: Promise<XGrammar> | null = null;

/** null when the spec parses, else XGrammar's message ("Unsupported type \"nope\"", "Regex parsing error at position 5: …"). */
export async function checkGrammar(spec: GrammarSpec): Promise<string | null> {
  if (spec.type === "json" && spec.schema !== null) {
    try {
      JSON.parse(spec.schema);
    } catch (e) {
      return `the schema is not JSON: ${(e as Error).message}`;
    }
  }
  if (spec.type === "choice" && spec.choices.length === 0) return "at least one choice is needed";
  instance ??= loadXGrammar();
  const xg = await instance;
  try {
    const grammar = await xg.explain(() => parseGrammar(xg, spec));
    grammar.dispose();
    return null;
  } catch (e) {
    return (e as Error).message;
  }
}

/**
 * The HTTP thread's check of a constrained request: the size limits
 * (grammar-limits.ts) and whether its JSON parses, in time linear in the
 * request and with no XGrammar instance on this thread (a trap in one used
 * to poison every later request). Whether the schema, regex or grammar means
 * anything is the compile sandbox's call, in the engine worker
 * (grammar-sandbox.ts), which answers with XGrammar's own message.
 */
import { type LimitViolation, checkGrammarLimits } from "./grammar-limits.js";
import type { GrammarSpec } from "./grammar-spec.js";

/** null when the spec is within the limits, else the sub-field at fault and why. `parsed`: its JSON as the request body held it. */
export function checkGrammar(spec: GrammarSpec, parsed?: unknown): LimitViolation | null {
  if (spec.type === "choice" && spec.choices.length === 0) return { path: "", message: "needs at least one choice" };
  const over = checkGrammarLimits(spec, parsed);
  if (over !== null && spec.type === "json" && over.message.startsWith("is not JSON")) return { path: "", message: `the schema ${over.message}` };
  return over;
}

/**
 * The rule by which `npm run bench -- default-model` (bench/suites/default-model.ts) calls a
 * definition right (issue #29), and how it recognizes a refusal. Pure functions, no model.
 *
 * A definition answer to "What does W mean?" is **correct** when, for one of W's top senses
 * (tools/train-default-model/vocab.jsonl, chosen by SemCor frequency), either
 *  - content-word overlap: with A = the answer's content words and G = the sense's gloss's
 *    (lower case, letters only, a stop-word list removed, W itself removed, a crude suffix
 *    stem: -ing, -ed, -es, -s, -ly), |A ∩ G| ≥ min(3, ⌈|G| / 2⌉) and |A ∩ G| ≥ |A| / 2: the
 *    answer carries at least half the gloss (three words suffice for a long gloss), and at
 *    least half of what it says is the gloss's. Example sentences (`For example: "…"`) are
 *    left out of A, since they name W rather than define it;
 *  - or a synonym: the answer names a member of the sense's synset (not W, not a stop word)
 *    as a whole word or phrase, and it is not a refusal.
 * A refusal ("I don't know …") is never a correct definition.
 *
 * Validated by hand on 20 answers, right and wrong (test/bench/definition-rule.test.ts).
 */

export interface Sense {
  pos: string;
  definition: string;
  synonyms: string[];
}

const STOP = new Set(
  ("a an the and or but nor of to in on at by for from with without into onto over under as is are was were be been being " +
    "it its this that these those which who whom whose what when where why how than then there their they them he she his her " +
    "him we you your our i me my mine not no so such some any all each every one ones very more most less least also only just " +
    "used use usually especially something someone somebody thing things way etc can could may might must shall should will would " +
    "do does did done have has had having means mean meaning word kind another other e g").split(" "),
);

/** A crude suffix stem, enough that "domesticated" meets "domesticate" and "trees" meets "tree". */
export function stem(w: string): string {
  for (const suffix of ["ing", "ed", "es", "s", "ly", "e"]) {
    if (w.length - suffix.length >= 3 && w.endsWith(suffix)) return w.slice(0, -suffix.length);
  }
  return w;
}

/** The set of stemmed content words of `text`, without the asked-about word `word`. */
export function contentWords(text: string, word: string): Set<string> {
  const own = new Set(word.toLowerCase().split(/[^a-z]+/).filter(Boolean).map(stem));
  const out = new Set<string>();
  for (const t of text.toLowerCase().split(/[^a-z]+/)) {
    if (t.length < 2 || STOP.has(t)) continue;
    const s = stem(t);
    if (!own.has(s)) out.add(s);
  }
  return out;
}

/** True when the answer declines: "I don't know …", "I do not know …". */
export function isRefusal(answer: string): boolean {
  return /\b(don'?t|do not|doesn'?t)\s+know\b/i.test(answer);
}

/** The answer without its example sentence(s): `For example: "…"` and any quoted text. */
export function definitionPart(answer: string): string {
  return answer.replace(/for example:?/gi, " ").replace(/"[^"]*"?/g, " ");
}

function namesPhrase(answer: string, phrase: string): boolean {
  const p = phrase.toLowerCase().replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(`(^|[^a-z])${p}([^a-z]|$)`).test(answer.toLowerCase());
}

/** Which test passed, if any: "gloss", "synonym" or null. */
export function judgeDefinition(answer: string, word: string, senses: readonly Sense[]): "gloss" | "synonym" | null {
  if (isRefusal(answer)) return null;
  const def = definitionPart(answer);
  const a = contentWords(def, word);
  for (const s of senses) {
    const g = contentWords(s.definition, word);
    if (g.size === 0) continue;
    let overlap = 0;
    for (const t of a) if (g.has(t)) overlap++;
    if (overlap >= Math.min(3, Math.ceil(g.size / 2)) && overlap * 2 >= a.size) return "gloss";
  }
  const w = word.toLowerCase();
  for (const s of senses) {
    for (const syn of s.synonyms) {
      const l = syn.toLowerCase();
      if (l === w || STOP.has(l) || l.length < 3 || namesPhrase(l, w)) continue;
      if (namesPhrase(def, syn)) return "synonym";
    }
  }
  return null;
}

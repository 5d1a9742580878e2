/**
 * Chunked encoding for legacy SentencePiece BPE tokenizers (Llama 1/2,
 * Mistral v1, TinyLlama and the embedded default model). Their tokenizer.json
 * has no pre-tokenizer: the normalizer turns spaces into "▁" and BPE runs over
 * the whole text as one word, which @huggingface/tokenizers does in time
 * superlinear in the word's length (measured on this machine with the default
 * model's tokenizer: 128 Ki characters take ~2.3 s whole, ~0.4 s in
 * 128–256-character pieces; 1 MiB took 15–27 s whole).
 *
 * Cutting the text at a single space between two characters other than
 * spaces and "▁" gives
 * exactly the same ids, provided
 *   - no vocabulary piece has "▁" after another character (so no merge can
 *     cross the "x|▁y" boundary: BPE on "…x▁y…" is BPE("…x") ++ BPE("▁y…"));
 *   - the normalizer is Prepend("▁") + Replace(" " → "▁"), so the piece after
 *     a cut, given without its leading space, normalizes to the same "▁y…";
 *   - the cut does not touch an added token (those split the text before
 *     normalization, and each split part gets its own Prepend).
 * `chunkableSentencePiece` checks the first two on tokenizer.json once;
 * `chunkCuts` keeps the cuts away from added tokens.
 */

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/** Target characters per piece: the measured sweet spot (64–256) of @huggingface/tokenizers' BPE. */
export const CHUNK_CHARS = 192;

function isPrependSpace(n: Json): boolean {
  return n["type"] === "Prepend" && n["prepend"] === "▁";
}

function isReplaceSpace(n: Json): boolean {
  return n["type"] === "Replace" && isObject(n["pattern"]) && n["pattern"]["String"] === " " && n["content"] === "▁";
}

/** Whether a tokenizer.json may be encoded piece by piece (see the header for the conditions). */
export function chunkableSentencePiece(tokenizerJson: unknown): boolean {
  if (!isObject(tokenizerJson)) return false;
  const model = tokenizerJson["model"];
  if (!isObject(model) || model["type"] !== "BPE" || !isObject(model["vocab"])) return false;
  if (tokenizerJson["pre_tokenizer"] !== null && tokenizerJson["pre_tokenizer"] !== undefined) return false;
  const norm = tokenizerJson["normalizer"];
  if (!isObject(norm) || norm["type"] !== "Sequence" || !Array.isArray(norm["normalizers"])) return false;
  const steps = norm["normalizers"].filter(isObject);
  if (steps.length !== 2 || !steps.some(isPrependSpace) || !steps.some(isReplaceSpace)) return false;
  for (const piece of Object.keys(model["vocab"])) {
    if (/[^▁]▁/u.test(piece)) return false;
  }
  const added = Array.isArray(tokenizerJson["added_tokens"]) ? tokenizerJson["added_tokens"] : [];
  return added.every((t) => isObject(t) && typeof t["content"] === "string" && !/[ ▁]/u.test(t["content"]));
}

/**
 * Where to cut `text`: indices of single spaces (neither a space nor a "▁" on either side)
 * about `target` characters apart, none touching an occurrence of an added
 * token. The pieces are text[0, c0), text[c0 + 1, c1), …, text[ck + 1, end).
 */
export function chunkCuts(text: string, addedTokens: readonly string[], target = CHUNK_CHARS): number[] {
  // Characters inside an occurrence of an added token: no cut may touch them.
  const inAdded = new Uint8Array(text.length);
  for (const token of addedTokens) {
    if (token === "") continue;
    for (let at = text.indexOf(token); at >= 0; at = text.indexOf(token, at + 1)) inAdded.fill(1, at, at + token.length);
  }
  // A space (or a literal "▁", which normalizes to the same) beside the cut would merge with its "▁".
  const spaceLike = (c: number): boolean => c === 32 || c === 0x2581;
  const isCut = (p: number): boolean =>
    text.charCodeAt(p) === 32 && p > 0 && p + 1 < text.length && !spaceLike(text.charCodeAt(p - 1)) && !spaceLike(text.charCodeAt(p + 1)) && inAdded[p - 1] === 0 && inAdded[p + 1] === 0;
  const cuts: number[] = [];
  let start = 0;
  while (start + 2 * target < text.length) {
    let p = start + target;
    const limit = Math.min(text.length - 1, start + 4 * target);
    while (p < limit && !isCut(p)) p++;
    if (p >= limit) {
      // No space near the target (a long run without one): take the next cut wherever it is.
      while (p < text.length - 1 && !isCut(p)) p++;
      if (p >= text.length - 1) break;
    }
    cuts.push(p);
    start = p + 1;
  }
  return cuts;
}

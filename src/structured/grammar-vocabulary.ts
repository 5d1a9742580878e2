/**
 * A tokenizer's vocabulary as XGrammar's TokenizerInfo wants it (xgrammar's
 * TokenizerInfo.from_huggingface): every token's encoded piece by id, and how
 * pieces decode to bytes —
 *
 *   byte_fallback   SentencePiece BPE (Llama 2, Mistral): "▁" is a space, "<0x0A>" a byte
 *   byte_level      GPT-2 byte-level BPE (Llama 3, Qwen2/3): each byte is a printable char
 *   raw             pieces are their text
 *
 * told apart by the pieces themselves; and whether encoding prepends a space
 * (SentencePiece's dummy prefix), seen by encoding "a". Special tokens are
 * given as "" so the grammar never emits them as text (XGrammar treats empty
 * pieces as special); the EOS ids are its stop tokens.
 */
import type { Tokenizer } from "../tokenizer/tokenizer.js";

export type VocabType = "byte_fallback" | "byte_level" | "raw";

export interface GrammarVocabulary {
  /** Piece of each id in [0, tokenizer.vocabSize); "" for special and unused ids. */
  encodedVocab: string[];
  vocabType: VocabType;
  prependSpace: boolean;
}

export function grammarVocabulary(tokenizer: Tokenizer): GrammarVocabulary {
  const encodedVocab: string[] = new Array<string>(tokenizer.vocabSize);
  let byteFallback = false;
  let byteLevel = false;
  for (let id = 0; id < tokenizer.vocabSize; id++) {
    const piece = tokenizer.idToToken(id);
    encodedVocab[id] = piece === undefined || tokenizer.isSpecial(id) ? "" : piece;
    if (piece === "<0x0A>") byteFallback = true;
    else if (piece === "\u010A" || piece === "\u0120") byteLevel = true; // "Ċ" (\n), "Ġ" (space)
  }
  const vocabType: VocabType = byteFallback ? "byte_fallback" : byteLevel ? "byte_level" : "raw";
  const first = tokenizer.encode("a", { addSpecialTokens: false })[0];
  const prependSpace = vocabType === "byte_fallback" && first !== undefined && (tokenizer.idToToken(first) ?? "").startsWith("\u2581");
  return { encodedVocab, vocabType, prependSpace };
}

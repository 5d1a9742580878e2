/**
 * SentencePiece's precompiled_charsmap, the normalization table a
 * SentencePiece model carries (normalizer_spec.precompiled_charsmap: XLM-R,
 * T5, mBART, ALBERT…), which tokenizer.json keeps as the "Precompiled"
 * normalizer (base64) and a GGUF file as tokenizer.ggml.precompiled_charsmap.
 * The blob, as sentencepiece's normalizer.cc (DecodePrecompiledCharsMap)
 * lays it out:
 *
 *   u32 LE n | n bytes: a darts-clone double-array trie, u32 LE units | the replacements: UTF-8, each ending in NUL
 *
 * The trie maps a UTF-8 key (one character, or a short sequence such as a
 * letter and its combining mark) to the byte offset of its replacement. A
 * unit u (darts-clone's DoubleArrayUnit) holds
 *
 *   label    u & (1 << 31 | 0xff)       the key byte that leads to this unit (bit 31: a leaf, never a byte)
 *   hasLeaf  (u >> 8) & 1              a key ends here: the leaf unit is at this unit's child base
 *   offset   (u >> 10) << ((u & 1 << 9) >> 6)   XORed with the position: the base of the children
 *   value    u & 0x7fffffff            (a leaf) the replacement's offset
 *
 * and a walk from the root (unit 0) XORs the position with each byte
 * (commonPrefixSearch).
 *
 * normalize() follows Hugging Face tokenizers' Precompiled normalizer
 * (spm_precompiled), which is what a tokenizer.json means and what
 * transformers and vLLM run: the text in extended grapheme clusters; a
 * cluster of fewer than 6 UTF-8 bytes is replaced whole by the rule of the
 * shortest key that prefixes it, if any; otherwise each of its characters by
 * its own rule, or kept. (sentencepiece itself, and llama.cpp's
 * llm_tokenizer_ugm, take the longest key at each byte position instead;
 * the two agree wherever no rule's key is a proper prefix of a short
 * cluster that another rule or no rule covers.) The blob's bounds and UTF-8
 * are checked when it is read, naming `where`.
 *
 * @huggingface/tokenizers (the JS library) approximates the Precompiled
 * normalizer with NFKC and a few fixed replacements, whatever the table;
 * useCharsmaps() puts this reading of the model's own table in its place.
 *
 *   const map = PrecompiledCharsmap.fromBase64(b64, "tokenizer.json normalizer");
 *   map.normalize("ｶﾞｷﾞ①");   // "ガギ1" under XLM-R's nmt_nfkc table
 *   useCharsmaps(hfTokenizer, "tokenizer.json");   // its Precompiled normalizers read their tables
 */
import type { Tokenizer as HfTokenizer } from "@huggingface/tokenizers";
import { ArgumentError } from "../errors.js";

const LEAF_BIT = 0x80000000;

/** Extended grapheme clusters, as unicode-segmentation's graphemes(true). */
const GRAPHEMES = new Intl.Segmenter(undefined, { granularity: "grapheme" });

export class PrecompiledCharsmap {
  /** The trie's units. */
  readonly #units: Uint32Array;
  /** The replacements, NUL-terminated UTF-8. */
  readonly #pool: Uint8Array;
  /** Replacement offset → its text. */
  readonly #texts = new Map<number, string>();
  /** Each ASCII character's replacement (null: none), looked up once. */
  readonly #ascii: (string | null)[];
  readonly #utf8 = new TextEncoder();

  /** `blob`: the charsmap's bytes; `where` names it in errors. */
  constructor(blob: Uint8Array, where: string) {
    if (blob.length < 4) throw new ArgumentError(where, `must be a precompiled charsmap (u32 trie size, trie, replacements), got ${blob.length} bytes`);
    const view = new DataView(blob.buffer, blob.byteOffset, blob.byteLength);
    const n = view.getUint32(0, true);
    if (n % 4 !== 0 || n < 4 || 4 + n > blob.length) throw new ArgumentError(where, `has a trie size of ${n} bytes, which must be a positive multiple of 4 within its ${blob.length - 4} bytes after the size`);
    this.#units = new Uint32Array(n / 4);
    for (let i = 0; i < this.#units.length; i++) this.#units[i] = view.getUint32(4 + 4 * i, true);
    this.#pool = blob.slice(4 + n);
    try {
      new TextDecoder("utf-8", { fatal: true }).decode(this.#pool);
    } catch {
      throw new ArgumentError(where, "has replacement strings that are not valid UTF-8");
    }
    this.#ascii = Array.from({ length: 128 }, (_, c) => {
      const v = this.#firstValue(Uint8Array.of(c));
      return v < 0 ? null : this.#text(v, where);
    });
  }

  /** From tokenizer.json's base64 string. */
  static fromBase64(b64: string, where: string): PrecompiledCharsmap {
    return new PrecompiledCharsmap(Uint8Array.from(Buffer.from(b64, "base64")), where);
  }

  /** The value of the shortest key that prefixes `key` (a NUL byte ends it), or −1: commonPrefixSearch's first result. */
  #firstValue(key: Uint8Array): number {
    const u = this.#units;
    const offset = (x: number): number => (x >>> 10) << ((x & 0x200) >>> 6);
    let pos = offset(u[0]!);
    for (let i = 0; i < key.length; i++) {
      const c = key[i]!;
      if (c === 0) return -1;
      pos ^= c;
      if (pos >= u.length) return -1;
      const unit = u[pos]!;
      if ((unit & (LEAF_BIT | 0xff)) >>> 0 !== c) return -1;
      pos ^= offset(unit);
      if (((unit >>> 8) & 1) === 1) return pos < u.length ? (u[pos]! & 0x7fffffff) : -1;
    }
    return -1;
  }

  /** The replacement at byte offset v of the pool (up to its NUL). */
  #text(v: number, where = "precompiled charsmap"): string {
    let t = this.#texts.get(v);
    if (t === undefined) {
      if (v > this.#pool.length) throw new ArgumentError(where, `has a rule pointing at byte ${v} past its ${this.#pool.length} replacement bytes`);
      let end = this.#pool.indexOf(0, v);
      if (end < 0) end = this.#pool.length;
      t = new TextDecoder().decode(this.#pool.subarray(v, end));
      this.#texts.set(v, t);
    }
    return t;
  }

  /** One piece (a grapheme, or one character) → its replacement, or null. */
  #replace(piece: string): string | null {
    if (piece.length === 1 && piece.charCodeAt(0) < 128) return this.#ascii[piece.charCodeAt(0)]!;
    const v = this.#firstValue(this.#utf8.encode(piece));
    return v < 0 ? null : this.#text(v);
  }

  /** `text` normalized as Hugging Face's Precompiled normalizer does (see the header). */
  normalize(text: string): string {
    let out = "";
    for (const { segment } of GRAPHEMES.segment(text)) {
      // A cluster's UTF-8 length: < 6 bytes means at most a few code units, so the check is cheap.
      if (segment.length < 6 && this.#utf8.encode(segment).length < 6) {
        const whole = this.#replace(segment);
        if (whole !== null) {
          out += whole;
          continue;
        }
      }
      for (const ch of segment) out += this.#replace(ch) ?? ch;
    }
    return out;
  }
}

/**
 * Makes each Precompiled normalizer of a loaded @huggingface/tokenizers
 * Tokenizer (alone, or inside a Sequence) normalize with its own
 * precompiled_charsmap (a bad table fails here, naming `where`'s
 * normalizer). One without a table keeps the library's approximation.
 * Added tokens marked `normalized` were matched at load against the
 * library's normalization, before this runs.
 */
export function useCharsmaps(hf: HfTokenizer, where: string): void {
  const visit = (n: LibNormalizer | null, path: string): void => {
    if (n === null) return;
    if (n.config.type === "Sequence") (n.normalizers ?? []).forEach((m, i) => visit(m, `${path}.normalizers[${i}]`));
    const b64 = n.config.precompiled_charsmap;
    if (n.config.type !== "Precompiled" || typeof b64 !== "string" || b64 === "") return;
    const map = PrecompiledCharsmap.fromBase64(b64, `${where} ${path}.precompiled_charsmap`);
    n.normalize = (text: string): string => map.normalize(text);
  };
  // The library's d.ts does not resolve its normalizer classes under NodeNext: the shape used here, from its Normalizer and Sequence.
  visit(hf.normalizer as unknown as LibNormalizer | null, "normalizer");
}

/** A @huggingface/tokenizers normalizer: its tokenizer.json entry, a Sequence's parts, and the method encode() calls. */
interface LibNormalizer {
  config: { type?: string; precompiled_charsmap?: unknown };
  normalizers?: (LibNormalizer | null)[];
  normalize(text: string): string;
}

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
 *   map.normalize("ﬁle ①");   // "file 1" under XLM-R's nmt_nfkc table
 *   useCharsmaps(hfTokenizer, "tokenizer.json");   // its Precompiled normalizers read their tables
 */
import type { Tokenizer as HfTokenizer } from "@huggingface/tokenizers";
import { ArgumentError } from "../errors.js";

const LEAF_BIT = 0x80000000;

/** Extended grapheme clusters, as unicode-segmentation's graphemes(true). */
const GRAPHEMES = new Intl.Segmenter(undefined, { granularity: "grapheme" });
/** Characters Intl.Segmenter is given at a time (segmented()). */
const WINDOW = 256;

/** True for printable ASCII (U+0020–U+007E): never Extend, ZWJ, SpacingMark, Prepend or LF, so a cluster always ends before it (UAX #29 GB999). */
const printable = (c: number): boolean => c >= 0x20 && c <= 0x7e;

/**
 * The extended grapheme clusters of `text`. An ASCII character followed by
 * printable ASCII (or by the end) is a cluster of its own; the stretches in
 * between (non-ASCII, controls, marks on ASCII letters) go to
 * Intl.Segmenter, which starts and ends them at certain boundaries.
 */
export function* graphemes(text: string): Generator<string> {
  let i = 0;
  while (i < text.length) {
    if (text.charCodeAt(i) < 0x80 && (i + 1 === text.length || printable(text.charCodeAt(i + 1)))) {
      yield text[i]!;
      i++;
      continue;
    }
    let j = i + 1;
    while (j < text.length && !(text.charCodeAt(j - 1) < 0x80 && printable(text.charCodeAt(j)))) j++;
    yield* segmented(text.slice(i, j));
    i = j;
  }
}

/**
 * Intl.Segmenter's clusters of `text`, in windows: V8's segment iterator
 * slows down with the length of its input (115k characters: 29 s whole,
 * 75 ms in windows of 256). Each window starts at a cluster boundary; its
 * last cluster (perhaps cut by the window's end) is segmented again at the
 * head of the next; a cluster longer than a window widens it.
 */
function* segmented(text: string): Generator<string> {
  let start = 0;
  let size = WINDOW;
  while (start < text.length) {
    const end = Math.min(text.length, start + size);
    const parts = Array.from(GRAPHEMES.segment(text.slice(start, end)), (p) => p.segment);
    if (end === text.length) return yield* parts;
    if (parts.length === 1) {
      size *= 2;
      continue;
    }
    const last = parts.pop()!;
    yield* parts;
    start = end - last.length;
    size = WINDOW;
  }
}

export class PrecompiledCharsmap {
  /** The trie's units. */
  readonly #units: Uint32Array;
  /** The replacements, NUL-terminated UTF-8. */
  readonly #pool: Uint8Array;
  /** Replacement offset → its text. */
  readonly #texts = new Map<number, string>();
  /** Each ASCII character's rule value (−1: none), looked up once. */
  readonly #asciiValues: Int32Array;
  readonly #utf8 = new TextEncoder();
  /** Scratch for a piece's UTF-8 bytes. */
  readonly #buf = new Uint8Array(64);

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
    this.#asciiValues = Int32Array.from({ length: 128 }, (_, c) => this.#firstValue(Uint8Array.of(c)));
    for (const v of this.#asciiValues) if (v >= 0) this.#text(v, where); // a rule past the pool fails here
  }

  /** From tokenizer.json's base64 string. */
  static fromBase64(b64: string, where: string): PrecompiledCharsmap {
    return new PrecompiledCharsmap(Uint8Array.from(Buffer.from(b64, "base64")), where);
  }

  /** The value of the shortest key that prefixes key[0, n) (a NUL byte ends it), or −1: commonPrefixSearch's first result. */
  #firstValue(key: Uint8Array, n = key.length): number {
    const u = this.#units;
    const offset = (x: number): number => (x >>> 10) << ((x & 0x200) >>> 6);
    let pos = offset(u[0]!);
    for (let i = 0; i < n; i++) {
      const c = key[i]!;
      if (c === 0) return -1;
      pos ^= c;
      if (pos >= u.length) return -1;
      const unit = u[pos]!;
      if ((unit & (LEAF_BIT | 0xff)) >>> 0 !== c) return -1;
      pos ^= offset(unit);
      if (((unit >>> 8) & 1) === 1) return pos < u.length ? u[pos]! & 0x7fffffff : -1;
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

  /** The rule value for a piece of text (a cluster, or one character), or −1. */
  #valueOf(piece: string): number {
    if (piece.length === 1 && piece.charCodeAt(0) < 128) return this.#asciiValues[piece.charCodeAt(0)]!;
    const buf = piece.length * 3 <= this.#buf.length ? this.#buf : new Uint8Array(piece.length * 3);
    return this.#firstValue(buf, this.#utf8.encodeInto(piece, buf).written);
  }

  /** `text` normalized as Hugging Face's Precompiled normalizer does (see the header). */
  normalize(text: string): string {
    let out = "";
    for (const cluster of graphemes(text)) {
      // A cluster under 6 UTF-8 bytes: its shortest-prefix rule replaces it whole.
      if (cluster.length < 6 && utf8Length(cluster) < 6) {
        const v = this.#valueOf(cluster);
        if (v >= 0) {
          out += this.#text(v);
          continue;
        }
        if (cluster.length === 1 || (cluster.length === 2 && cluster.codePointAt(0)! > 0xffff)) {
          out += cluster; // one character, no rule
          continue;
        }
      }
      for (const ch of cluster) {
        const v = this.#valueOf(ch);
        out += v < 0 ? ch : this.#text(v);
      }
    }
    return out;
  }
}

/** UTF-8 length of a short string (lone surrogates count 3, as TextEncoder writes U+FFFD). */
function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c < 0xdc00 && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) (n += 4), i++;
    else n += 3;
  }
  return n;
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

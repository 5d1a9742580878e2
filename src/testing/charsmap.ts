/**
 * A SentencePiece precompiled_charsmap built from a few rules, for tests: the
 * blob sentencepiece's normalizer.cc reads (u32 LE trie size | darts-clone
 * double-array trie | NUL-terminated UTF-8 replacements), the one
 * src/tokenizer/precompiled-charsmap.ts reads back. Real tables
 * (nmt_nfkc: ~240 KB) come from sentencepiece's builder; this one is the
 * same format over a handful of keys.
 *
 * The trie is the simplest valid double array: each node with children gets
 * a fresh 256-unit block at base b (so its children sit at b ^ label = b +
 * label and never collide), its unit stores offset = position ^ b, and a
 * key ending at a node is a leaf unit at b ^ 0 (bit 31 set, value = the
 * replacement's byte offset) flagged by the node's has-leaf bit (darts-clone's
 * DoubleArrayUnit layout: label in bits 0–7, has-leaf bit 8, offset from bit 10).
 *
 *   buildCharsmap({ "①": "(1)", "ｶﾞ": "ガ", "\u200b": "" })   → Uint8Array
 */

interface Node {
  children: Map<number, Node>;
  /** Byte offset of the replacement when a key ends here. */
  value: number | null;
}

/** The charsmap blob for `rules` (key → replacement; keys non-empty, no NUL). */
export function buildCharsmap(rules: Readonly<Record<string, string>>): Uint8Array {
  const utf8 = new TextEncoder();
  const root: Node = { children: new Map(), value: null };
  const pool: number[] = [];
  for (const [key, replacement] of Object.entries(rules)) {
    const k = utf8.encode(key);
    if (k.length === 0 || k.includes(0)) throw new Error(`buildCharsmap: key ${JSON.stringify(key)} must be non-empty and hold no NUL`);
    let node = root;
    for (const c of k) {
      let next = node.children.get(c);
      if (next === undefined) node.children.set(c, (next = { children: new Map(), value: null }));
      node = next;
    }
    node.value = pool.length;
    pool.push(...utf8.encode(replacement), 0);
  }
  const units: number[] = [0];
  let blocks = 1; // block 0 holds the root's unit
  const place = (node: Node, pos: number, label: number): void => {
    const hasBlock = node.children.size > 0 || node.value !== null;
    const base = hasBlock ? 256 * blocks++ : 0;
    while (units.length < 256 * blocks) units.push(0);
    const offset = hasBlock ? pos ^ base : 0;
    if (offset >= 1 << 21) throw new Error("buildCharsmap: too many rules for this simple builder");
    units[pos] = ((offset << 10) | (node.value !== null ? 1 << 8 : 0) | label) >>> 0;
    if (node.value !== null) units[base] = (0x80000000 | node.value) >>> 0;
    for (const [c, child] of node.children) place(child, base ^ c, c);
  };
  place(root, 0, 0);
  const out = new Uint8Array(4 + 4 * units.length + pool.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, 4 * units.length, true);
  units.forEach((u, i) => view.setUint32(4 + 4 * i, u, true));
  out.set(pool, 4 + 4 * units.length);
  return out;
}

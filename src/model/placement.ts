/**
 * Placement: which wasm memory each part of a model lives in, the way Hugging
 * Face accelerate's `infer_auto_device_map` (device_map="auto") assigns
 * modules to devices — walk the parts in execution order and fill one memory
 * up to its budget before opening the next. A part is never split: a decoder
 * layer sits in one memory together with its weights and its share of the KV
 * cache, so a step's activations cross a memory boundary once per boundary.
 *
 * This is a pure function of sizes, separate from loading, so that another
 * policy (tensor parallelism: one shard of every layer per memory, as
 * xFasterTransformer splits heads across ranks) can replace it without
 * touching the loader or the decoder.
 */
import { ArgumentError } from "../errors.js";
import { formatBytes } from "../runtime/allocator.js";

/** One part to place: what it keeps, and what it needs only while loading (its checkpoint tensors before conversion). */
export interface PlacedPart {
  name: string;
  /** Bytes held for the model's lifetime (weights, and for a layer its KV blocks). */
  bytes: number;
  /** Extra bytes needed while the part loads (freed after, but the memory keeps its pages). */
  loadBytes: number;
}

export interface PlacementInput {
  /** The embedding (memory 0's first part). */
  embedding: PlacedPart;
  /** Decoder layers in order. */
  layers: readonly PlacedPart[];
  /** The final norm and the LM head (with tied embeddings: the norm alone, placed with the embedding). */
  head: PlacedPart;
  /** The LM head is the embedding's matrix: the head goes where the embedding is. */
  tied: boolean;
  /** Bytes every memory needs besides its parts (a step's activations, workspaces). */
  perMemoryBytes: number;
  /** Bytes one memory may hold. */
  memoryBudget: number;
}

/** One memory's share. */
export interface MemoryShare {
  /** Decoder layers [from, to) held here (from = to: none). */
  layers: [number, number];
  embedding: boolean;
  head: boolean;
  /** Bytes it holds at its peak: parts, per-memory activations, and the largest part's load bytes. */
  bytes: number;
}

export interface Placement {
  /** Memory of the embedding. */
  embedding: number;
  /** Memory of each decoder layer. */
  layers: number[];
  /** Memory of the final norm and LM head. */
  head: number;
  memories: MemoryShare[];
}

/**
 * Places the parts in order, opening a new memory when the next part does not
 * fit in the current one. Throws an ArgumentError naming the part when one
 * part alone does not fit in an empty memory.
 */
export function placeAuto(input: PlacementInput): Placement {
  const { memoryBudget, perMemoryBytes } = input;
  const memories: (MemoryShare & { held: number; load: number })[] = [];
  const open = (): number => {
    memories.push({ layers: [0, 0], embedding: false, head: false, bytes: 0, held: perMemoryBytes, load: 0 });
    return memories.length - 1;
  };
  const fits = (m: number, part: PlacedPart): boolean => {
    const s = memories[m]!;
    return s.held + part.bytes + Math.max(s.load, part.loadBytes) <= memoryBudget;
  };
  const put = (m: number, part: PlacedPart): void => {
    const s = memories[m]!;
    s.held += part.bytes;
    s.load = Math.max(s.load, part.loadBytes);
  };
  const alone = (part: PlacedPart): void => {
    const need = perMemoryBytes + part.bytes + part.loadBytes;
    if (need > memoryBudget) {
      throw new ArgumentError(
        part.name,
        `needs ${formatBytes(need)} in one memory (${formatBytes(part.bytes)} held, ${formatBytes(part.loadBytes)} while loading, ${formatBytes(perMemoryBytes)} of activations), more than a memory's ${formatBytes(memoryBudget)}`,
      );
    }
  };

  alone(input.embedding);
  let current = open();
  put(current, input.embedding);
  memories[current]!.embedding = true;
  // With tied embeddings the head (the final norm) joins the embedding's memory up front.
  if (input.tied) {
    alone(input.head);
    put(current, input.head);
    memories[current]!.head = true;
  }
  const layers: number[] = [];
  input.layers.forEach((part, l) => {
    alone(part);
    if (!fits(current, part)) current = open();
    const s = memories[current]!;
    if (s.layers[1] === s.layers[0]) s.layers = [l, l];
    s.layers[1] = l + 1;
    put(current, part);
    layers.push(current);
  });
  let head = 0;
  if (!input.tied) {
    alone(input.head);
    if (!fits(current, input.head)) current = open();
    put(current, input.head);
    memories[current]!.head = true;
    head = current;
  }
  return {
    embedding: 0,
    layers,
    head,
    memories: memories.map(({ layers: ls, embedding, head: h, held, load }) => ({ layers: ls, embedding, head: h, bytes: held + load })),
  };
}

/** "memory 0: embedding, layers 0–15, 3.91 GiB; memory 1: layers 16–31, head, 3.40 GiB" */
export function describePlacement(placement: Placement): string {
  return placement.memories
    .map((m, i) => {
      const parts: string[] = [];
      if (m.embedding) parts.push("embedding");
      if (m.layers[1] > m.layers[0]) parts.push(m.layers[1] - m.layers[0] === 1 ? `layer ${m.layers[0]}` : `layers ${m.layers[0]}–${m.layers[1] - 1}`);
      if (m.head) parts.push("head");
      return `memory ${i}: ${parts.join(", ")}, ${formatBytes(m.bytes)}`;
    })
    .join("; ");
}

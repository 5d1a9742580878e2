// Embedding lookup: rows of a packed Weight (any format) gathered by token id
// and decoded to f32. Also the way a whole Weight is dequantized (ids = 0:
// item i reads row i).

import { unpackRow } from "../linalg/pack";

@unmanaged class EmbeddingArgs {
  /** Packed weight [rows, cols] (layout.ts). */
  w: usize;
  format: i32;
  nb: i32;
  cols: i32;
  /** int32 [T] row ids, or 0 for ids = item. */
  ids: usize;
  /** f32 [T, cols], rows outStride bytes apart. */
  out: usize;
  outStride: i32;
}

/** Item t writes out[t, :] = W[ids[t], :]. */
export function task_embedding(item: i32, tid: i32, args: usize): void {
  const a = changetype<EmbeddingArgs>(args);
  const row = a.ids ? load<i32>(a.ids + (<usize>item << 2)) : item;
  unpackRow(a.format, a.w, a.nb, a.cols, row, a.out + <usize>item * <usize>a.outStride);
}

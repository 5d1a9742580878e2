// Bulk dtype conversion: decode any storage dtype to f32, or encode f32 into
// any storage dtype. Used to load weights, to write KV, and by the codec tests
// to hold this path to the TypeScript codec bit for bit.

import { DT_F32, dtypeBytes, load4AsF32, loadAsF32, storeFromF32 } from "./dtype";

/** dst[0..n) (f32) = decode(src[0..n) of dtype srcDt). */
export function decode_to_f32(srcDt: i32, src: usize, dst: usize, n: i32): void {
  let i = 0;
  if (srcDt <= 5) {
    for (; i + 4 <= n; i += 4) v128.store(dst + (<usize>i << 2), load4AsF32(srcDt, src, <usize>i));
  }
  for (; i < n; i++) store<f32>(dst + (<usize>i << 2), loadAsF32(srcDt, src, <usize>i));
}

/** dst[0..n) (dtype dstDt) = encode(src[0..n) f32); `saturate` applies to fp8. */
export function encode_from_f32(dstDt: i32, src: usize, dst: usize, n: i32, saturate: i32): void {
  for (let i = 0; i < n; i++) storeFromF32(dstDt, dst, <usize>i, load<f32>(src + (<usize>i << 2)), saturate != 0);
}

@unmanaged class ConvertArgs {
  src: usize;
  dst: usize;
  n: i32;
  srcDt: i32;
  dstDt: i32;
  saturate: i32;
  /** Elements per work item (a multiple of 4). */
  chunk: i32;
}

/** Work item k converts elements [k·chunk, min(n, (k+1)·chunk)) from srcDt to dstDt (through f32). */
export function task_convert(item: i32, tid: i32, args: usize): void {
  const a = changetype<ConvertArgs>(args);
  const start = item * a.chunk;
  const count = min(a.chunk, a.n - start);
  if (count <= 0) return;
  const src = a.src + <usize>start * dtypeBytes(a.srcDt);
  const dst = a.dst + <usize>start * dtypeBytes(a.dstDt);
  if (a.dstDt == DT_F32) decode_to_f32(a.srcDt, src, dst, count);
  else if (a.srcDt == DT_F32) encode_from_f32(a.dstDt, src, dst, count, a.saturate);
  else for (let i = 0; i < count; i++) storeFromF32(a.dstDt, dst, <usize>i, loadAsF32(a.srcDt, src, <usize>i), a.saturate != 0);
}

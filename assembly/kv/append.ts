// appendKv (vLLM's reshape_and_cache): write the new tokens' K and V rows into
// their cache slots, quantizing on write. One work item = one token; it writes
// that token's Hkv rows of D values for K and for V.
//
// Quantization (mode codes of src/kv/kv-quant.ts), all arithmetic in f32:
//   0 none         code = encode(x)                       f32 / f16 / bf16
//   1 per-tensor   code = fp8(x / scalar), saturating     fp8 e4m3 / e5m2
//   2 per-channel  code = rne(x / scale[h,i] − offset[h,i]) clamped to int8
//   3 per-token    scale = max|x| / 127 over the row, stored at [slot, h];
//                  code = rne(x / scale) (0 when the row is all zeros)

import { dtypeBytes, encodeInt8, storeFromF32 } from "../tensor/dtype";

const MODE_PER_TENSOR: i32 = 1;
const MODE_PER_CHANNEL: i32 = 2;
const MODE_PER_TOKEN: i32 = 3;

@unmanaged class AppendKvArgs {
  /** f32 [T, Hkv, D] rows, `srcStride` elements apart. */
  srcK: usize;
  srcV: usize;
  srcStride: i32;
  /** i32 [T]; −1 skips the token. */
  slots: usize;
  /** dtype [numSlots, Hkv, D] */
  dstK: usize;
  dstV: usize;
  dt: i32;
  hkv: i32;
  d: i32;
  mode: i32;
  /** per-tensor scales */
  scalarK: f32;
  scalarV: f32;
  /** per-channel f32 [Hkv, D] or per-token f32 [numSlots, Hkv] */
  scaleK: usize;
  scaleV: usize;
  /** per-channel f32 [Hkv, D] */
  offsetK: usize;
  offsetV: usize;
}

function writeRows(src: usize, dst: usize, slot: i32, a: AppendKvArgs, scalar: f32, scale: usize, offset: usize): void {
  const d = a.d;
  const bytes = <usize>dtypeBytes(a.dt);
  for (let h = 0; h < a.hkv; h++) {
    const x = src + (<usize>(h * d) << 2);
    const row = <usize>(slot * a.hkv + h);
    const out = dst + row * <usize>d * bytes;
    if (a.mode == MODE_PER_TOKEN) {
      let amax: f32 = 0;
      for (let i = 0; i < d; i++) amax = max(amax, abs(load<f32>(x + (<usize>i << 2))));
      const s: f32 = amax / 127;
      store<f32>(scale + (row << 2), s);
      for (let i = 0; i < d; i++) {
        const q = s > 0 ? encodeInt8(load<f32>(x + (<usize>i << 2)) / s) : 0;
        store<i8>(out + <usize>i, <i8>q);
      }
    } else if (a.mode == MODE_PER_CHANNEL) {
      const c = <usize>(h * d);
      for (let i = 0; i < d; i++) {
        const k = (c + <usize>i) << 2;
        const y: f32 = load<f32>(x + (<usize>i << 2)) / load<f32>(scale + k) - load<f32>(offset + k);
        store<i8>(out + <usize>i, <i8>encodeInt8(y));
      }
    } else if (a.mode == MODE_PER_TENSOR) {
      for (let i = 0; i < d; i++) storeFromF32(a.dt, out, <usize>i, load<f32>(x + (<usize>i << 2)) / scalar, true);
    } else {
      for (let i = 0; i < d; i++) storeFromF32(a.dt, out, <usize>i, load<f32>(x + (<usize>i << 2)), false);
    }
  }
}

export function task_append_kv(item: i32, tid: i32, args: usize): void {
  const a = changetype<AppendKvArgs>(args);
  const slot = load<i32>(a.slots + (<usize>item << 2));
  if (slot < 0) return;
  const off = <usize>item * <usize>a.srcStride << 2;
  writeRows(a.srcK + off, a.dstK, slot, a, a.scalarK, a.scaleK, a.offsetK);
  writeRows(a.srcV + off, a.dstV, slot, a, a.scalarV, a.scaleV, a.offsetV);
}


/**
 * copyTensor: copies a tensor's elements into another of the same dtype and
 * shape, in the same memory or another one — how activations cross from one
 * wasm memory to the next when a model's layers are placed across several
 * (the host-side copy between devices in accelerate's device_map hooks).
 * Contiguous tensors copy as one byte range; strided ones row by row in the
 * last dimension.
 */
import { ArgumentError, show } from "../errors.js";
import { DTYPE_BYTES } from "./dtype.js";
import { Tensor } from "./tensor.js";

/** Copies `src` into `dst` (same dtype and shape; any memories). Returns dst. */
export function copyTensor(src: Tensor, dst: Tensor): Tensor {
  if (!(src instanceof Tensor)) throw new ArgumentError("src", `must be a Tensor, got ${show(src)}`);
  if (!(dst instanceof Tensor)) throw new ArgumentError("dst", `must be a Tensor, got ${show(dst)}`);
  if (src.dtype !== dst.dtype) throw new ArgumentError("dst.dtype", `must be src's ${src.dtype}, got ${dst.dtype}`);
  if (src.rank !== dst.rank || src.shape.some((d, i) => d !== dst.shape[i])) {
    throw new ArgumentError("dst.shape", `must be src's ${show(src.shape)}, got ${show(dst.shape)}`);
  }
  const bytes = DTYPE_BYTES[src.dtype];
  if (src.numel === 0) return dst;
  if (src.isContiguous() && dst.isContiguous()) {
    new Uint8Array(dst.memory.buffer, dst.ptr, src.numel * bytes).set(new Uint8Array(src.memory.buffer, src.ptr, src.numel * bytes));
    return dst;
  }
  // Row by row over the last dimension (contiguous within a row when its stride is 1).
  const cols = src.shape[src.rank - 1]!;
  const rowContiguous = src.strides[src.rank - 1] === 1 && dst.strides[dst.rank - 1] === 1;
  const s = new Uint8Array(src.memory.buffer);
  const d = new Uint8Array(dst.memory.buffer);
  const srcOffsets = src.offsets();
  const dstOffsets = dst.offsets();
  for (let i = 0; i < src.numel; i += rowContiguous ? cols : 1) {
    const a = src.ptr + srcOffsets.next().value! * bytes;
    const b = dst.ptr + dstOffsets.next().value! * bytes;
    const n = (rowContiguous ? cols : 1) * bytes;
    d.set(s.subarray(a, a + n), b);
    if (rowContiguous) for (let j = 1; j < cols; j++) (srcOffsets.next(), dstOffsets.next());
  }
  return dst;
}

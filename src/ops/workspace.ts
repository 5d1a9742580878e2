/**
 * A scratch region in the shared memory that the ops use within one call (the
 * quantized or padded activation of a linear layer). One region per runtime,
 * grown on demand and kept: a steady-state decode step allocates nothing.
 * Calls are sequential on the calling thread, so one region is enough.
 */
import type { Runtime } from "../runtime/runtime.js";

const regions = new WeakMap<Runtime, { ptr: number; bytes: number }>();

/** Address of at least `bytes` bytes of scratch, valid until the next call. */
export function opsWorkspace(rt: Runtime, bytes: number): number {
  const have = regions.get(rt);
  if (have && have.bytes >= bytes) return have.ptr;
  if (have) rt.heap.free(have.ptr);
  const size = Math.max(bytes, have ? have.bytes * 2 : 1 << 16);
  const region = { ptr: rt.heap.alloc(size, "ops workspace"), bytes: size };
  regions.set(rt, region);
  return region.ptr;
}

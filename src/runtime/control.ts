/**
 * The fork–join task descriptor: 64 bytes of Int32 slots plus an error-text
 * buffer, in the shared memory, read by the calling thread and every worker.
 *
 *   GEN      bumped once per task; workers Atomics.wait on it
 *   KERNEL   index into kernelNames(module)
 *   COUNT    number of work items
 *   NEXT     next unclaimed item (Atomics.add claims one)
 *   PENDING  workers that have not finished the task; the caller waits on it
 *   ERROR    0, or 1 + the thread id of the first thread that failed
 *   ARGS     byte address of the kernel's argument struct
 *   STOP     set once by dispose(): workers exit
 *   ERR_ITEM the item that failed
 *   ERR_LEN  bytes of UTF-8 error text at ERR_TEXT
 *   MEMORY   which memory's instances run the task (index into the runtime's memories)
 *
 * KERNEL = ADD_MEMORY is not a kernel: every worker takes the memory posted to
 * its port and instantiates the module over it (runtime.addMemory()).
 */
export const GEN = 0;
export const KERNEL = 1;
export const COUNT = 2;
export const NEXT = 3;
export const PENDING = 4;
export const ERROR = 5;
export const ARGS = 6;
export const STOP = 7;
export const ERR_ITEM = 8;
export const ERR_LEN = 9;
export const MEMORY = 10;

/** KERNEL value of the broadcast that makes every worker instantiate the module over a new memory. */
export const ADD_MEMORY = -1;

export const CONTROL_SLOTS = 16;
export const ERR_TEXT = CONTROL_SLOTS * 4;
export const ERR_TEXT_BYTES = 1024;
export const CONTROL_BYTES = ERR_TEXT + ERR_TEXT_BYTES;

/** A kernel as every thread calls it: (item, thread id, argument struct address). */
export type TaskKernel = (item: number, tid: number, args: number) => unknown;

/** Spin iterations on GEN / PENDING before sleeping in Atomics.wait (≈ 100 µs). */
export const SPIN = 20000;

/**
 * Claims and runs items until none are left. On a throw or trap, records the
 * first failure (thread, item, message) and makes every other thread stop
 * claiming. Shared by the calling thread and the workers. `kernels[m][k]` is
 * kernel k of this thread's instance over memory m; `memory` holds `ctl`.
 */
export function runItems(ctl: Int32Array, memory: WebAssembly.Memory, kernels: readonly (readonly TaskKernel[])[], tid: number): void {
  const count = Atomics.load(ctl, COUNT);
  const kernel = kernels[Atomics.load(ctl, MEMORY)]![Atomics.load(ctl, KERNEL)]!;
  const args = Atomics.load(ctl, ARGS) >>> 0;
  for (;;) {
    const item = Atomics.add(ctl, NEXT, 1);
    if (item >= count) return;
    try {
      kernel(item, tid, args);
    } catch (e) {
      Atomics.store(ctl, NEXT, count);
      if (Atomics.compareExchange(ctl, ERROR, 0, tid + 1) === 0) {
        const text = new TextEncoder().encode(e instanceof Error ? `${e.name}: ${e.message}` : String(e));
        const n = Math.min(text.length, ERR_TEXT_BYTES);
        new Uint8Array(memory.buffer, ctl.byteOffset + ERR_TEXT, n).set(text.subarray(0, n));
        Atomics.store(ctl, ERR_LEN, n);
        Atomics.store(ctl, ERR_ITEM, item);
      }
      return;
    }
  }
}

/** Reads the recorded error text. */
export function errorText(ctl: Int32Array, memory: WebAssembly.Memory): string {
  const n = Atomics.load(ctl, ERR_LEN);
  return new TextDecoder().decode(new Uint8Array(memory.buffer, ctl.byteOffset + ERR_TEXT, n).slice());
}

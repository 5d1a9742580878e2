/**
 * The fork–join task descriptor: 64 bytes of Int32 slots plus an error-text
 * buffer, in the shared memory, read by the calling thread and every worker.
 *
 *   GEN      bumped once per task; workers Atomics.wait on it
 *   KERNEL   index into kernelNames(module)
 *   COUNT    number of work items
 *   NEXT     next unclaimed item (Atomics.add claims one)
 *   PENDING  workers that have not yet taken an ADD_MEMORY broadcast; the caller waits on it
 *   ERROR    0, or 1 + the thread id of the first thread that failed
 *   ARGS     byte address of the kernel's argument struct
 *   STOP     set once by dispose(): workers exit
 *   ERR_ITEM the item that failed
 *   ERR_LEN  bytes of UTF-8 error text at ERR_TEXT
 *   MEMORY   which memory's instances run the task (index into the runtime's memories)
 *   STATE    the task's door: CLOSED (bit 30) or open, plus the workers inside
 *
 * The door (enterTask / leaveTask / closeTask) lets the caller finish a task
 * without waiting for workers that never showed up. A worker reads the
 * descriptor only once inside; the caller rewrites it only when the door is
 * closed with nobody inside. So the caller runs what no worker claimed, closes
 * the door, and waits only for the workers inside, each finishing the item it
 * holds. A worker the OS has not scheduled yet (it was asleep, or the cores
 * are busy) costs nothing: when it runs it finds the door closed, or a later
 * task open, whose descriptor it then reads and helps with. Before the door,
 * the join waited for every worker to check in, and on a loaded machine a
 * one-millisecond step waited milliseconds for a worker's time slice.
 *
 * KERNEL = ADD_MEMORY is not a kernel: every worker takes the memory posted to
 * its port and instantiates the module over it (runtime.addMemory()); the
 * caller keeps the door open until PENDING says every worker has.
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
export const STATE = 11;

/** STATE bit: the door is closed (no task, or the caller is joining). The low bits count the workers inside. */
export const CLOSED = 1 << 30;

/** KERNEL value of the broadcast that makes every worker instantiate the module over a new memory. */
export const ADD_MEMORY = -1;

export const CONTROL_SLOTS = 16;
export const ERR_TEXT = CONTROL_SLOTS * 4;
export const ERR_TEXT_BYTES = 1024;
export const CONTROL_BYTES = ERR_TEXT + ERR_TEXT_BYTES;

/** A kernel as every thread calls it: (item, thread id, argument struct address). */
export type TaskKernel = (item: number, tid: number, args: number) => unknown;

/** Spin iterations on GEN / STATE before sleeping in Atomics.wait (≈ 200 µs: ≈ 10 ns an Atomics.load, measured on this machine). */
export const SPIN = 20000;

/** A worker tries to go in: true when the door was open (the descriptor is then the current task's until it leaves). */
export function enterTask(ctl: Int32Array): boolean {
  for (;;) {
    const s = Atomics.load(ctl, STATE);
    if (s & CLOSED) return false;
    if (Atomics.compareExchange(ctl, STATE, s, s + 1) === s) return true;
  }
}

/** A worker leaves; the last one out of a closing task wakes the caller. */
export function leaveTask(ctl: Int32Array): void {
  if (Atomics.sub(ctl, STATE, 1) === (CLOSED | 1)) Atomics.notify(ctl, STATE);
}

/** The caller opens the door of the task it has just described (the door must be closed with nobody inside). */
export function openTask(ctl: Int32Array): void {
  Atomics.store(ctl, STATE, 0);
}

/** The caller closes the door and waits (spinning SPIN loads first) until the workers inside have left. */
export function closeTask(ctl: Int32Array): void {
  let s = Atomics.or(ctl, STATE, CLOSED) | CLOSED;
  for (let spin = 0; s !== CLOSED && spin < SPIN; spin++) s = Atomics.load(ctl, STATE);
  while (s !== CLOSED) {
    Atomics.wait(ctl, STATE, s);
    s = Atomics.load(ctl, STATE);
  }
}

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

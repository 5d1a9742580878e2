/**
 * A pool worker: instantiates the kernel module once per shared memory, then
 * runs tasks forever — spin briefly on GEN, sleep in Atomics.wait, go in
 * through the task's door (control.ts; a closed door: the caller has already
 * finished that task without us), claim items with the instance of the task's
 * memory, leave (the last one out of a closing task wakes the caller). A task
 * of kernel ADD_MEMORY takes the memory posted to this worker's port
 * (receiveMessageOnPort: the worker never returns to its event loop),
 * instantiates the module over it and decrements PENDING, once per memory.
 */
import { type MessagePort, parentPort, receiveMessageOnPort, workerData } from "node:worker_threads";
import { ADD_MEMORY, GEN, KERNEL, MEMORY, PENDING, SPIN, STOP, type TaskKernel, enterTask, leaveTask, runItems } from "./control.js";
import { instantiate, kernelNames } from "./module.js";

interface PoolWorkerData {
  module: WebAssembly.Module;
  memory: WebAssembly.Memory;
  control: number;
  controlSlots: number;
  tid: number;
  /** Later memories arrive here. */
  port: MessagePort;
}

const { module, memory, control, controlSlots, tid, port } = workerData as PoolWorkerData;
const names = kernelNames(module);
/** kernels[m][k]: kernel k of this worker's instance over memory m. */
const kernels: TaskKernel[][] = [];
const addInstance = (m: WebAssembly.Memory): void => {
  const exports = instantiate(module, m);
  kernels.push(names.map((name) => exports[name] as unknown as TaskKernel));
};
addInstance(memory);
const ctl = new Int32Array(memory.buffer, control, controlSlots);

/** The memory the caller posted before broadcasting ADD_MEMORY (already queued: postMessage enqueues synchronously). */
function takeMemory(): WebAssembly.Memory {
  for (;;) {
    const msg = receiveMessageOnPort(port);
    if (msg) return msg.message as WebAssembly.Memory;
    Atomics.wait(ctl, STOP, 0, 1);
  }
}

let seen = Atomics.load(ctl, GEN);
parentPort!.postMessage("ready");

for (;;) {
  let gen = Atomics.load(ctl, GEN);
  for (let spin = 0; gen === seen && spin < SPIN; spin++) gen = Atomics.load(ctl, GEN);
  while (gen === seen) {
    Atomics.wait(ctl, GEN, seen);
    gen = Atomics.load(ctl, GEN);
  }
  seen = gen;
  if (Atomics.load(ctl, STOP)) break;
  if (!enterTask(ctl)) continue; // finished without us: wait for the next one
  // Inside, the descriptor is the open task's (maybe a later one than GEN said: fine, it is whole).
  if (Atomics.load(ctl, KERNEL) !== ADD_MEMORY) runItems(ctl, memory, kernels, tid);
  else if (kernels.length === Atomics.load(ctl, MEMORY)) {
    addInstance(takeMemory());
    if (Atomics.sub(ctl, PENDING, 1) === 1) Atomics.notify(ctl, PENDING);
  }
  leaveTask(ctl);
}

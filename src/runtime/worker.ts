/**
 * A pool worker: instantiates the kernel module on the shared memory, then
 * runs tasks forever — spin briefly on GEN, sleep in Atomics.wait, claim items,
 * decrement PENDING, wake the caller when it reaches zero.
 */
import { parentPort, workerData } from "node:worker_threads";
import { GEN, PENDING, SPIN, STOP, type TaskKernel, runItems } from "./control.js";
import { instantiate, kernelNames } from "./module.js";

interface PoolWorkerData {
  module: WebAssembly.Module;
  memory: WebAssembly.Memory;
  control: number;
  controlSlots: number;
  tid: number;
}

const { module, memory, control, controlSlots, tid } = workerData as PoolWorkerData;
const exports = instantiate(module, memory);
const kernels = kernelNames(module).map((name) => exports[name] as unknown as TaskKernel);
const ctl = new Int32Array(memory.buffer, control, controlSlots);

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
  runItems(ctl, memory, kernels, tid);
  if (Atomics.sub(ctl, PENDING, 1) === 1) Atomics.notify(ctl, PENDING);
}

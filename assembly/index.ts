// The flat kernel ABI: every exported function takes pointers and sizes. Task
// kernels run under WorkerPool.parallelFor as (item: i32, tid: i32, args: usize),
// with `args` the address of an @unmanaged argument struct written by the TS side.

export * from "./runtime/selftest";
export * from "./tensor/convert";
export * from "./bench/roofline";
export * from "./kv/append";
export * from "./attention/flash";
export * from "./attention/merge";

// The flat kernel ABI: every exported function takes pointers and sizes. Task
// kernels run under WorkerPool.parallelFor as (item: i32, tid: i32, args: usize),
// with `args` the address of an @unmanaged argument struct written by the TS side.

export * from "./runtime/selftest";
export * from "./tensor/convert";
export * from "./bench/roofline";
export * from "./kv/append";
export * from "./attention/flash";
export * from "./attention/merge";
export * from "./linalg/pack";
export * from "./linalg/activation";
export * from "./linalg/linear";
export * from "./ops/embedding";
export * from "./ops/rmsnorm";
export * from "./ops/layernorm";
export * from "./ops/rope";
export * from "./ops/activations";
export * from "./ops/elementwise";
export * from "./linalg/ggml-pack";
export * from "./linalg/kquant-activation";
export * from "./linalg/kquant-linear";
export * from "./ops/sampling";

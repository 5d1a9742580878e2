/**
 * Suite `roofline`: the machine's ceilings themselves, with the scaling of
 * all threads over one and the targets (benchmark, not test).
 */
import type { Row, Suite } from "../harness.js";

export const roofline: Suite = {
  name: "roofline",
  description: "wasm SIMD f32 throughput, memory read bandwidth (1 and all threads), parallelFor fork–join overhead",
  run({ ceilings: c }): Row[] {
    return [
      { metric: "simd_f32", threads: 1, value: c.simd_gflops_1t, unit: "GFLOP/s", scaling: 1, target: "", met: null },
      { metric: "simd_f32", threads: c.threads, value: c.simd_gflops_all, unit: "GFLOP/s", scaling: c.simd_gflops_all / c.simd_gflops_1t, target: "scaling ≥ 1.8", met: c.simd_gflops_all / c.simd_gflops_1t >= 1.8 },
      { metric: "read_bw", threads: 1, value: c.read_gbps_1t, unit: "GB/s", scaling: 1, target: "", met: null },
      { metric: "read_bw", threads: c.threads, value: c.read_gbps_all, unit: "GB/s", scaling: c.read_gbps_all / c.read_gbps_1t, target: "scaling ≥ 1.6", met: c.read_gbps_all / c.read_gbps_1t >= 1.6 },
      { metric: "forkjoin", threads: c.threads, value: c.forkjoin_us, unit: "µs", scaling: null, target: "≤ 20 µs", met: c.forkjoin_us <= 20 },
      { metric: "forkjoin_cold", threads: c.threads, value: c.forkjoin_cold_us, unit: "µs", scaling: null, target: "", met: null },
    ];
  },
};

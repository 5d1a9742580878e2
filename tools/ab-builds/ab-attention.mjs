// Decode attention (increFlashAttention, BNSD cache, one query per sequence)
// on two or more builds of kvflash in one process, alternated round by round
// (the first DIR is the base of the ratios), with the machine's ceilings
// measured by the first build's bench/ceilings.js at the start and the end
// (their mean is the roofline's bandwidth and SIMD peak), and the load average.
//
//   node tools/ab-builds/ab-attention.mjs KERNELS ROUNDS CASES DIR1 DIR2 …
//     KERNELS  baseline | relaxed
//     CASES    dtype:b:sk[,…]  dtype f32 | bf16 | f16, e.g. f32:1:4096,f16:1:4096
//     DIR      a built checkout (its dist/ and build/; see README.md)
//   env H, HKV, D (default 32, 8, 128: the attention suite's shapes), CALLS
//   (calls per round, default max(4, layers)).
//
// As in the attention suite, each call reads the next of several copies of
// the cache spanning ≥ 96 MB. f32 K/V are uniform in [−0.5, 0.5); f16 and
// bf16 codes have |x| in [2^-6, 1) (no subnormals), random sign and mantissa.
// Prints per build: median ms per call, roofline = max(bytes / read_bw,
// flops / simd) / ms, the median of the per-round time ratios base / this,
// and max |out − base out| (0: bit-identical outputs).
import { execSync } from "node:child_process";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { loadBuild } from "./load-build.mjs";
const url = (dir, path) => pathToFileURL(resolve(dir, path)).href;
const [kernels, roundsS, casesS, ...dirs] = process.argv.slice(2);
const rounds = Number(roundsS);
const H = +(process.env.H ?? 32), HKV = +(process.env.HKV ?? 8), D = +(process.env.D ?? 128);
const libs = [];
for (const d of dirs) libs.push({ dir: d, lib: await loadBuild(d) });
const ceilMod = await import(url(dirs[0], "dist/bench/ceilings.js"));
const bytesOf = (dt) => (dt === "f32" ? 4 : 2);
function fill(t, seed) {
  let s = seed;
  const n = t.numel;
  if (t.dtype === "f32") {
    const a = new Float32Array(t.memory.buffer, t.ptr, n);
    const vals = new Float32Array(4099);
    for (let i = 0; i < vals.length; i++) { s = (Math.imul(s, 1103515245) + 12345) >>> 0; vals[i] = s / 2 ** 32 - 0.5; }
    for (let o = 0; o < n; o += vals.length) a.set(vals.subarray(0, Math.min(vals.length, n - o)), o);
  } else {
    const a = new Uint16Array(t.memory.buffer, t.ptr, n);
    const vals = new Uint16Array(4099);
    for (let i = 0; i < vals.length; i++) {
      s = (Math.imul(s, 1103515245) + 12345) >>> 0;
      // |x| in [2^-6, 1): f16 exponent 9..14 / bf16 exponent 121..126, random mantissa and sign
      const sign = (s >>> 31) & 1, man = (s >>> 8) & 0x3ff, e = 9 + ((s >>> 3) % 6);
      vals[i] = t.dtype === "f16" ? (sign << 15) | (e << 10) | man : (sign << 15) | ((e + 112) << 7) | (man >> 3);
    }
    for (let o = 0; o < n; o += vals.length) a.set(vals.subarray(0, Math.min(vals.length, n - o)), o);
  }
  return t;
}
const cases = casesS.split(",").map((c) => { const [dt, b, sk] = c.split(":"); return { dt, b: +b, sk: +sk }; });
const sides = [];
for (const { dir, lib } of libs) {
  const rt = await lib.createRuntime({ threads: 2, kernels });
  for (const c of cases) {
    const perSeq = HKV * c.sk * D * bytesOf(c.dt);
    const layerBytes = c.b * perSeq;
    const layers = Math.max(1, Math.ceil(96e6 / layerBytes));
    const k = fill(rt.tensor(c.dt, [layers * layerBytes / bytesOf(c.dt)]), 1);
    const v = fill(rt.tensor(c.dt, [layers * layerBytes / bytesOf(c.dt)]), 2);
    const strides = [HKV * c.sk * D, c.sk * D, D, 1];
    const view = (buf, l) => new lib.Tensor(rt.memory, buf.ptr + l * layerBytes, c.dt, [c.b, HKV, c.sk, D], strides);
    const ks = Array.from({ length: layers }, (_, l) => view(k, l)), vs = Array.from({ length: layers }, (_, l) => view(v, l));
    const q = fill(rt.tensor("f32", [c.b, H, 1, D]), 3);
    const out = rt.tensor("f32", [c.b, H, 1, D]);
    const plan = lib.AttentionPlan.create(rt, { actualSeqLengths: new Array(c.b).fill(c.sk), numHeads: H, numKvHeads: HKV, headDim: D });
    let layer = 0;
    const call = () => { lib.increFlashAttention(rt, { q, k: ks[layer], v: vs[layer], plan, out }); layer = (layer + 1) % layers; };
    call();
    sides.push({ dir, c, call, layers, times: [], out, rt });
  }
}
const pause = new Int32Array(new SharedArrayBuffer(4));
const ceilings = () => ceilMod.measureCeilings(sides[0].rt, true);
const c0 = ceilings();
const load0 = execSync("cat /proc/loadavg").toString().trim();
for (let r = 0; r < rounds; r++) {
  for (const c of cases) {
    const mine = sides.filter((s) => s.c === c);
    const order = r % 2 ? [...mine].reverse() : mine;
    for (const s of order) {
      Atomics.wait(pause, 0, 0, 0.3);
      const n = Math.max(+(process.env.CALLS ?? 4), s.layers);
      const t0 = performance.now();
      for (let i = 0; i < n; i++) s.call();
      s.times.push((performance.now() - t0) / n);
    }
  }
}
const c1 = ceilings();
const load1 = execSync("cat /proc/loadavg").toString().trim();
const med = (xs) => { const a = [...xs].sort((x, y) => x - y); return a.length % 2 ? a[a.length >> 1] : (a[a.length / 2 - 1] + a[a.length / 2]) / 2; };
const bw = (c0.read_gbps_all + c1.read_gbps_all) / 2, simd = (c0.simd_gflops_all + c1.simd_gflops_all) / 2;
console.log(`kernels=${sides[0].rt.kernels} node=${process.version} rounds=${rounds}`);
console.log(`ceilings start: read ${c0.read_gbps_all.toFixed(1)} GB/s simd ${c0.simd_gflops_all.toFixed(1)} GFLOP/s (1t ${c0.simd_gflops_1t.toFixed(1)}); end: read ${c1.read_gbps_all.toFixed(1)} simd ${c1.simd_gflops_all.toFixed(1)} (1t ${c1.simd_gflops_1t.toFixed(1)})`);
console.log(`loadavg start ${load0} | end ${load1}`);
for (const c of cases) {
  const mine = sides.filter((s) => s.c === c);
  const flops = 4 * D * H * c.b * c.sk, bytes = 2 * c.b * HKV * c.sk * D * bytesOf(c.dt) + 2 * c.b * H * D * 4;
  const base = mine[0];
  for (const s of mine) {
    const ms = med(s.times);
    const bound = Math.max(bytes / (bw * 1e6), flops / (simd * 1e6));
    const ratios = s.times.map((t, i) => base.times[i] / t);
    console.log(`${c.dt} b=${c.b} sk=${c.sk} ${s.dir}: ms ${ms.toFixed(3)} roofline ${(bound / ms).toFixed(3)} (bw-bound ${(bytes / (bw * 1e6) / ms).toFixed(3)}, simd-bound ${(flops / (simd * 1e6) / ms).toFixed(3)}) base/this: median-ratio ${med(ratios).toFixed(3)} ratio-of-medians ${(med(base.times) / ms).toFixed(3)}`);
  }
}
// outputs equal across builds?
for (const c of cases) {
  const mine = sides.filter((s) => s.c === c);
  const a = new Float32Array(mine[0].rt.memory.buffer, mine[0].out.ptr, mine[0].out.numel);
  for (const s of mine.slice(1)) {
    const b = new Float32Array(s.rt.memory.buffer, s.out.ptr, s.out.numel);
    let maxd = 0; for (let i = 0; i < a.length; i++) maxd = Math.max(maxd, Math.abs(a[i] - b[i]));
    console.log(`${c.dt} ${s.dir} max |out − base| = ${maxd}`);
  }
}
for (const s of new Set(sides.map((s) => s.rt))) await s.dispose();

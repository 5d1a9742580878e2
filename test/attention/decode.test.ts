// increFlashAttention against the float64 reference: head dims 16..256 and 13,
// GQA groups 1, 2, 4, 5, 6, 7, 8, actual lengths 0, 1, 7, 97, 1000, 4096 in one batch
// (cache rows past each length are NaN: reading one shows), f32/f16/bf16
// caches, BNSD and BSND, multi-token decode, every option alone and all
// together, forced split counts, and thread counts (tolerances: support.ts).
import { after, before, describe, test } from "node:test";
import { AttentionPlan, type IncreFlashAttentionOptions, type Runtime, createRuntime } from "../../src/ops-entry.js";
import { type HostTensor, assertClose, assertIdentical, freeAll, host, hostCache, materialize, reference, rng, wasm } from "./support.js";

const LENGTHS = [0, 1, 7, 97, 1000, 4096];
const SMAX = 4096;

interface Spec {
  q: HostTensor;
  k: HostTensor;
  v: HostTensor;
  layout: "BNSD" | "BSND";
  actualSeqLengths: number[];
  [option: string]: unknown;
}

function spec(seed: number, o: { D: number; G: number; Hkv: number; Sq?: number; dtype?: "f32" | "f16" | "bf16"; layout?: "BNSD" | "BSND"; lengths?: number[] }): Spec {
  const random = rng(seed);
  const { D, G, Hkv, Sq = 1, dtype = "f32", layout = "BNSD", lengths = LENGTHS } = o;
  const B = lengths.length;
  const H = G * Hkv;
  const qShape = layout === "BNSD" ? [B, H, Sq, D] : [B, Sq, H, D];
  return {
    q: host("f32", qShape, () => 2 * random() - 1),
    k: hostCache(dtype, layout, B, Hkv, SMAX, D, lengths, random),
    v: hostCache(dtype, layout, B, Hkv, SMAX, D, lengths, random),
    layout,
    actualSeqLengths: lengths,
  };
}

describe("increFlashAttention vs the float64 reference", () => {
  let rt: Runtime;
  before(async () => {
    rt = await createRuntime();
  });
  after(() => rt.dispose());

  function check(name: string, s: Spec, extra: Partial<IncreFlashAttentionOptions> = {}): void {
    const o = { ...materialize(rt, s), ...extra } as IncreFlashAttentionOptions;
    try {
      assertClose(name, wasm.decode(rt, o), reference.decode(rt, o), s.q.shape[3]!);
    } finally {
      freeAll(rt, o);
    }
  }

  const dims = [16, 64, 80, 128, 256, 13];
  dims.forEach((D, di) => {
    [1, 2, 4, 7].forEach((G, gi) => {
      const dtype = (["f32", "bf16", "f16"] as const)[(di + gi) % 3];
      const layout = (["BNSD", "BSND"] as const)[(di + gi) % 2];
      const Hkv = D <= 80 ? 2 : 1;
      test(`D=${D} G=${G} Hkv=${Hkv} ${dtype} ${layout}: lengths ${LENGTHS.join(", ")}`, () => {
        check(`D=${D} G=${G}`, spec(100 + 10 * di + gi, { D, G, Hkv, dtype, layout }), { returnLse: true });
      });
    });
  });

  // 5..8 query heads a KV head: two row blocks on the decode path (4 rows, then G − 4).
  for (const [gi, G] of [5, 6, 8].entries()) {
    for (const [ti, dtype] of (["f16", "bf16", "f32"] as const).entries()) {
      test(`G=${G} ${dtype} (5..8 rows a KV head: a 4-row block and the rest): lengths ${LENGTHS.join(", ")}`, () => {
        check(`G=${G} ${dtype}`, spec(800 + 10 * gi + ti, { D: 64, G, Hkv: 2, dtype, layout: ti === 1 ? "BSND" : "BNSD" }), { returnLse: true, causal: true });
      });
    }
  }

  test("G = 6, 7, 8 give bit for bit what the same heads give as a 4-head call and a (G − 4)-head call", () => {
    const B = LENGTHS.length;
    const D = 64;
    for (const [i, G] of [6, 7, 8].entries()) {
      const s = spec(850 + i, { D, G, Hkv: 1, dtype: i === 1 ? "bf16" : "f16" });
      const headsOf = (from: number, to: number): HostTensor =>
        host("f32", [B, to - from, 1, D], (j) => {
          const d = j % D, h = Math.floor(j / D) % (to - from), b = Math.floor(j / (D * (to - from)));
          return s.q.values[(b * G + from + h) * D + d]!;
        });
      const run = (q: HostTensor) => {
        const o = materialize(rt, { ...s, q }) as unknown as IncreFlashAttentionOptions;
        try {
          return wasm.decode(rt, o);
        } finally {
          freeAll(rt, o);
        }
      };
      const all = run(s.q);
      const parts: [number, number][] = [[0, 4], [4, G]];
      for (const [from, to] of parts) {
        const part = run(headsOf(from, to));
        const n = to - from;
        for (let b = 0; b < B; b++) {
          assertIdentical(`G=${G} b=${b} heads ${from}..${to - 1}, out`, all.out.subarray((b * G + from) * D, (b * G + to) * D), part.out.subarray(b * n * D, (b + 1) * n * D));
          assertIdentical(`G=${G} b=${b} heads ${from}..${to - 1}, lse`, all.lse.subarray(b * G + from, b * G + to), part.lse.subarray(b * n, (b + 1) * n));
        }
      }
    }
  });

  test("multi-token decode (Sq = 16, causal; a sequence shorter than Sq keeps no key for its first queries)", () => {
    check("Sq=16", spec(200, { D: 64, G: 4, Hkv: 2, Sq: 16, lengths: [5, 16, 97, 1000, 0, 4096] }), { causal: true });
    check("Sq=2 BSND bf16", spec(201, { D: 80, G: 2, Hkv: 2, Sq: 2, dtype: "bf16", layout: "BSND" }), { causal: true });
  });

  describe("each option alone and all together (D=64, G=4, Sq=3)", () => {
    const B = LENGTHS.length;
    const [G, Hkv, Sq, D] = [4, 2, 3, 64];
    const H = G * Hkv;
    const random = rng(300);
    const options: Record<string, Record<string, unknown>> = {
      scale: { scale: 0.7 },
      causal: { causal: true },
      "window [50, 0]": { window: [50, 0] },
      "window [300, -1] causal": { window: [300, -1], causal: true },
      "alibi [H]": { alibiSlopes: host("f32", [H], (i) => 2 ** (-(i + 1))) },
      "alibi [B, H]": { alibiSlopes: host("f32", [B, H], () => random() * 0.1) },
      "bias [B, 1, Sq, Smax]": { bias: host("f32", [B, 1, Sq, SMAX], () => 3 * random() - 1.5) },
      "bias [Smax]": { bias: host("f32", [SMAX], () => 3 * random() - 1.5) },
      "mask [B, 1, 1, Smax]": { mask: host("uint8", [B, 1, 1, SMAX], () => (random() < 0.25 ? 1 : 0)) },
      "mask [B, H, Sq, Smax]": { mask: host("uint8", [B, H, Sq, SMAX], () => (random() < 0.5 ? 1 : 0)) },
      softcap: { softcap: 1.5, scale: 1 },
    };
    for (const [name, opt] of Object.entries(options)) {
      test(name, () => check(name, { ...spec(301, { D, G, Hkv, Sq }), ...opt } as Spec, { returnLse: true }));
    }
    test("all together, bf16", () => {
      const all = { ...options["alibi [H]"], ...options["bias [B, 1, Sq, Smax]"], ...options["mask [B, 1, 1, Smax]"], window: [700, 0], causal: true, softcap: 4, scale: 0.3 };
      check("all", { ...spec(302, { D, G, Hkv, Sq, dtype: "bf16" }), ...all } as Spec);
    });
  });

  test("forced split counts 1, 2, 5, 64 match the reference and each other", () => {
    const s = spec(400, { D: 128, G: 4, Hkv: 2, Sq: 2, dtype: "bf16" });
    const o = { ...materialize(rt, s), causal: true } as IncreFlashAttentionOptions;
    try {
      const ref = reference.decode(rt, o);
      const one = wasm.decode(rt, { ...o, splitKv: 1 });
      assertClose("splitKv=1", one, ref, 128);
      for (const splitKv of [2, 5, 64]) {
        const r = wasm.decode(rt, { ...o, splitKv });
        assertClose(`splitKv=${splitKv}`, r, ref, 128);
        assertClose(`splitKv=${splitKv} vs 1`, r, one, 128);
      }
    } finally {
      freeAll(rt, o);
    }
  });

  describe("split-KV with every option at once (partials and their merge see the same exclusions)", () => {
    const cases = [
      { name: "few rows (G=2, Sq=3: in-place bf16 stream path)", G: 2, Hkv: 2, Sq: 3, D: 128, dtype: "bf16" as const },
      { name: "many rows (G=7, Sq=16, D=256: scratch-tile path)", G: 7, Hkv: 1, Sq: 16, D: 256, dtype: "f32" as const },
      { name: "few rows, f16, D=20 (decoded stream path)", G: 4, Hkv: 1, Sq: 2, D: 20, dtype: "f16" as const },
    ];
    cases.forEach((c, ci) => {
      test(c.name, () => {
        const random = rng(600 + ci);
        const B = LENGTHS.length;
        const H = c.G * c.Hkv;
        const all = {
          alibiSlopes: host("f32", [B, H], () => 0.05 * random()),
          bias: host("f32", [1, H, c.Sq, SMAX], () => random() - 0.5),
          mask: host("uint8", [B, 1, c.Sq, SMAX], () => (random() < 0.15 ? 1 : 0)),
          window: [900, 1],
          causal: true,
          softcap: 6,
        };
        const o = materialize(rt, { ...spec(610 + ci, c), ...all }) as unknown as IncreFlashAttentionOptions;
        try {
          const ref = reference.decode(rt, o);
          for (const splitKv of [1, 3, 40]) assertClose(`${c.name}, splitKv=${splitKv}`, wasm.decode(rt, { ...o, splitKv }), ref, c.D);
        } finally {
          freeAll(rt, o);
        }
      });
    });
  });

  test("edge shapes: D = 1, 2, 3, 255; G = 64 with Sq = 2 (128 rows, two row blocks); every length 0", () => {
    for (const [i, D] of [1, 2, 3, 255].entries()) {
      check(`D=${D}`, spec(700 + i, { D, G: 3, Hkv: 1, Sq: 2, dtype: i % 2 ? "bf16" : "f32", lengths: [0, 1, 300] }), { causal: true, splitKv: i + 1 });
    }
    check("G=64", spec(710, { D: 16, G: 64, Hkv: 1, Sq: 2, lengths: [5, 600] }), { causal: true });
    check("all empty", spec(711, { D: 16, G: 2, Hkv: 2, lengths: [0, 0] }), { returnLse: true });
  });

  test("one thread and all threads give identical bits for one plan, and agree for their own plans", async () => {
    const rt1 = await createRuntime({ threads: 1 });
    const rtN = await createRuntime({ threads: Math.max(3, rt.threads) });
    const s = spec(500, { D: 64, G: 7, Hkv: 1, Sq: 1, dtype: "f16" });
    const results = [];
    for (const r of [rt1, rtN]) {
      const o = materialize(r, s) as unknown as IncreFlashAttentionOptions;
      const forced = AttentionPlan.create(r, { actualSeqLengths: LENGTHS, numHeads: 7, numKvHeads: 1, headDim: 64, splitKv: 6 });
      results.push({ forced: wasm.decode(r, { ...o, plan: forced }), auto: wasm.decode(r, o), threads: r.threads });
      forced.dispose();
      freeAll(r, o);
    }
    assertIdentical("forced plan, out", results[0]!.forced.out, results[1]!.forced.out);
    assertIdentical("forced plan, lse", results[0]!.forced.lse, results[1]!.forced.lse);
    assertClose("auto plans", results[0]!.auto, results[1]!.auto, 64);
    await Promise.all([rt1.dispose(), rtN.dispose()]);
  });
});

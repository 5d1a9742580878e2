// flashAttention against the float64 reference: head dims 16..256 and 13, GQA
// groups 1, 2, 4, 7, BNSD/BSND/TND, ragged batches whose key lengths are
// 0, 1, 7, 97, 1000, 4096 (queries aligned with the last keys), every option
// alone and all together, and thread counts (tolerances: support.ts).
import { after, before, describe, test } from "node:test";
import { type FlashAttentionOptions, type Runtime, createRuntime } from "../../src/ops-entry.js";
import { type HostTensor, assertClose, assertIdentical, freeAll, host, materialize, reference, rng, wasm } from "./support.js";

interface Spec {
  q: HostTensor;
  k: HostTensor;
  v: HostTensor;
  [option: string]: unknown;
}

function dense(seed: number, o: { B?: number; H: number; Hkv: number; Sq: number; Sk: number; D: number; dtype?: "f32" | "f16" | "bf16"; layout?: "BNSD" | "BSND" }): Spec {
  const random = rng(seed);
  const { B = 1, H, Hkv, Sq, Sk, D, dtype = "f32", layout = "BNSD" } = o;
  const shape = (N: number, S: number) => (layout === "BNSD" ? [B, N, S, D] : [B, S, N, D]);
  return {
    q: host("f32", shape(H, Sq), () => 2 * random() - 1),
    k: host(dtype, shape(Hkv, Sk), () => 2 * random() - 1),
    v: host(dtype, shape(Hkv, Sk), () => 2 * random() - 1),
    layout,
  };
}

/** TND: sequences with (Sq, Sk) pairs concatenated. */
function ragged(seed: number, o: { H: number; Hkv: number; D: number; seqs: [number, number][]; dtype?: "f32" | "f16" | "bf16" }): Spec {
  const random = rng(seed);
  const { H, Hkv, D, seqs, dtype = "f32" } = o;
  const cuSeqlensQ = [0];
  const cuSeqlensK = [0];
  for (const [sq, sk] of seqs) {
    cuSeqlensQ.push(cuSeqlensQ.at(-1)! + sq);
    cuSeqlensK.push(cuSeqlensK.at(-1)! + sk);
  }
  const Tq = cuSeqlensQ.at(-1)!;
  const Tk = cuSeqlensK.at(-1)!;
  return {
    q: host("f32", [Tq, H, D], () => 2 * random() - 1),
    k: host(dtype, [Tk, Hkv, D], () => 2 * random() - 1),
    v: host(dtype, [Tk, Hkv, D], () => 2 * random() - 1),
    layout: "TND",
    cuSeqlensQ,
    cuSeqlensK,
  };
}

/** Key lengths 0, 1, 7, 97, 1000, 4096 in one batch; the long ones with a short query chunk (cached prefix). */
const MIXED: [number, number][] = [
  [0, 0],
  [1, 1],
  [7, 7],
  [97, 97],
  [33, 1000],
  [19, 4096],
];

describe("flashAttention vs the float64 reference", () => {
  let rt: Runtime;
  before(async () => {
    rt = await createRuntime();
  });
  after(() => rt.dispose());

  function check(name: string, s: Spec, extra: Partial<FlashAttentionOptions> = {}): void {
    const o = { ...materialize(rt, s), ...extra } as FlashAttentionOptions;
    try {
      assertClose(name, wasm.flash(rt, o), reference.flash(rt, o), s.q.shape.at(-1)!);
    } finally {
      freeAll(rt, o);
    }
  }

  const dims = [16, 64, 80, 128, 256, 13];
  dims.forEach((D, di) => {
    [1, 2, 4, 7].forEach((G, gi) => {
      const dtype = (["f32", "bf16", "f16"] as const)[(di + gi) % 3];
      const layout = (["BNSD", "BSND"] as const)[(di + gi) % 2];
      const causal = (di + gi) % 2 === 0;
      test(`D=${D} G=${G} ${dtype} ${layout}${causal ? " causal" : ""}: Sq = Sk = 97, two KV heads`, () => {
        check(`D=${D} G=${G}`, dense(100 + 10 * di + gi, { B: 1, H: 2 * G, Hkv: 2, Sq: 97, Sk: 97, D, dtype, layout }), { causal });
      });
    });
  });

  test("TND, key lengths 0..4096 in one batch, causal, bf16, G=2", () => {
    check("mixed TND", ragged(200, { H: 2, Hkv: 1, D: 64, seqs: MIXED, dtype: "bf16" }), { causal: true });
  });

  test("TND with more queries than keys in a sequence (causal rows before the first key are empty)", () => {
    check("Sq > Sk", ragged(201, { H: 4, Hkv: 2, D: 32, seqs: [[9, 4], [70, 3], [5, 130]] }), { causal: true });
  });

  test("a long causal sequence: Sq = Sk = 1000, G=2, D=64", () => {
    check("S=1000", dense(202, { H: 2, Hkv: 1, Sq: 1000, Sk: 1000, D: 64 }), { causal: true });
  });

  test("Sq ≠ Sk in BNSD (bottom-right causal) and B = 3", () => {
    check("Sq<Sk", dense(203, { B: 3, H: 4, Hkv: 4, Sq: 37, Sk: 150, D: 48, dtype: "f16" }), { causal: true });
  });

  describe("each option alone and all together", () => {
    const [H, Hkv, D] = [4, 2, 40];
    const seqs: [number, number][] = [[0, 0], [1, 1], [7, 7], [97, 97], [20, 1000], [5, 300]];
    const maxSq = 97;
    const maxSk = 1000;
    const B = seqs.length;
    const random = rng(300);
    const options: Record<string, Record<string, unknown>> = {
      scale: { scale: 1.3 },
      causal: { causal: true },
      "window [16, 3]": { window: [16, 3] },
      "window [-1, 0]": { window: [-1, 0] },
      "window [40, -1] + causal": { window: [40, -1], causal: true },
      "alibi [H]": { alibiSlopes: host("f32", [H], (i) => 2 ** (-(i + 1))) },
      "alibi [B, H]": { alibiSlopes: host("f32", [B, H], () => random() * 0.2) },
      "bias [B, H, maxSq, maxSk]": { bias: host("f32", [B, H, maxSq, maxSk], () => 2 * random() - 1) },
      "bias [maxSq, 1]": { bias: host("f32", [maxSq, 1], () => 4 * random() - 2) },
      "mask [B, 1, maxSq, maxSk]": { mask: host("uint8", [B, 1, maxSq, maxSk], () => (random() < 0.3 ? 1 : 0)) },
      "mask [maxSk]": { mask: host("uint8", [maxSk], () => (random() < 0.6 ? 1 : 0)) },
      softcap: { softcap: 2, scale: 1 },
    };
    for (const [name, opt] of Object.entries(options)) {
      test(`TND: ${name}`, () => check(name, { ...ragged(301, { H, Hkv, D, seqs }), ...opt } as Spec, { returnLse: true }));
    }
    test("TND: all together, f16", () => {
      const all = { ...options["alibi [B, H]"], ...options["bias [B, H, maxSq, maxSk]"], ...options["mask [B, 1, maxSq, maxSk]"], window: [64, 0], causal: true, softcap: 3, scale: 0.5 };
      check("all TND", { ...ragged(302, { H, Hkv, D, seqs, dtype: "f16" }), ...all } as Spec);
    });
    test("BNSD: all together, D = 13", () => {
      const all = {
        alibiSlopes: host("f32", [4], (i) => 0.1 * (i + 1)),
        bias: host("f32", [2, 1, 45, 60], () => random() - 0.5),
        mask: host("uint8", [45, 60], () => (random() < 0.2 ? 1 : 0)),
        window: [20, 2],
        causal: true,
        softcap: 5,
      };
      check("all BNSD", { ...dense(303, { B: 2, H: 4, Hkv: 1, Sq: 45, Sk: 60, D: 13 }), ...all } as Spec);
    });
  });

  test("edge shapes: D = 1, 2, 3, 255; G = 80 (a block of more rows than RMAX); no keys at all", () => {
    for (const [i, D] of [1, 2, 3, 255].entries()) check(`D=${D}`, dense(500 + i, { B: 2, H: 3, Hkv: 1, Sq: 9, Sk: 70, D, dtype: i % 2 ? "bf16" : "f32" }), { causal: i % 2 === 0 });
    check("G=80", dense(510, { H: 80, Hkv: 1, Sq: 3, Sk: 100, D: 8 }), { causal: true });
    check("no keys", ragged(511, { H: 2, Hkv: 1, D: 16, seqs: [[3, 0], [0, 0], [2, 0]] }), { causal: true });
  });

  test("one thread and all threads give identical bits", async () => {
    const rt1 = await createRuntime({ threads: 1 });
    const rtN = await createRuntime({ threads: Math.max(3, rt.threads) });
    const s = ragged(400, { H: 8, Hkv: 2, D: 64, seqs: [[97, 97], [150, 400], [1, 33], [64, 64]], dtype: "bf16" });
    const runs = [rt1, rtN].map((r) => {
      const o = materialize(r, s) as unknown as FlashAttentionOptions;
      const res = wasm.flash(r, { ...o, causal: true, window: [100, -1] });
      freeAll(r, o);
      return res;
    });
    assertIdentical("out", runs[0]!.out, runs[1]!.out);
    assertIdentical("lse", runs[0]!.lse, runs[1]!.lse);
    await Promise.all([rt1.dispose(), rtN.dispose()]);
  });
});

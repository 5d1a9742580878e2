/**
 * A float64 reference of transformers' BertModel + sentence-transformers'
 * Pooling/Normalize, written for clarity and run one sequence at a time (no
 * padding, no batching): the oracle of the encoder tests; and the
 * classification heads of the *ForSequenceClassification cross-encoders
 * (referenceScore). It reads the
 * checkpoint's f32 tensors straight from model.safetensors.
 *
 *   x = LayerNorm(E_word[id] + E_pos[i] + E_type[0])
 *   per layer: x = LN(x + Wo·softmax(QKᵀ/√D)V + bo); x = LN(x + W2·gelu(W1·x + b1) + b2)
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";

export type Tensors = Map<string, { shape: number[]; data: Float64Array }>;

export function readF32Safetensors(path: string): Tensors {
  const buf = readFileSync(path);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString("utf8")) as Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
  const out: Tensors = new Map();
  for (const [name, e] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    if (e.dtype !== "F32") throw new Error(`reference reads F32 only, ${name} is ${e.dtype}`);
    const [a, b] = e.data_offsets;
    const bytes = buf.subarray(8 + n + a, 8 + n + b);
    const f = new Float32Array(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
    out.set(name, { shape: e.shape, data: Float64Array.from(f) });
  }
  return out;
}

/** erf to ~1e-15: its Maclaurin series for |x| < 3, the erfc continued fraction (Lentz) beyond. */
export function erf64(x: number): number {
  const a = Math.abs(x);
  if (a < 3) {
    let term = a;
    let sum = a;
    for (let n = 1; n < 200; n++) {
      term *= (-a * a) / n;
      const add = term / (2 * n + 1);
      sum += add;
      if (Math.abs(add) < 1e-17 * Math.abs(sum)) break;
    }
    return Math.sign(x) * (2 / Math.sqrt(Math.PI)) * sum;
  }
  // erfc(a) = exp(−a²)/√π · 1/(a + (1/2)/(a + 1/(a + (3/2)/(a + …)))), evaluated from the back.
  let f = a;
  for (let k = 200; k >= 1; k--) f = a + k / 2 / f;
  const erfc = Math.exp(-a * a) / Math.sqrt(Math.PI) / f;
  return Math.sign(x) * (1 - erfc);
}

export interface RefConfig {
  hidden: number;
  heads: number;
  layers: number;
  eps: number;
  gelu: "erf" | "tanh";
  /** First position id: 0 (BERT) or padding_idx + 1 (XLM-RoBERTa: create_position_ids_from_input_ids). Default 0. */
  positionOffset?: number;
}

function layerNorm(x: number[], w: Float64Array, b: Float64Array, eps: number): number[] {
  const mean = x.reduce((s, v) => s + v, 0) / x.length;
  const varc = x.reduce((s, v) => s + (v - mean) ** 2, 0) / x.length;
  return x.map((v, i) => ((v - mean) / Math.sqrt(varc + eps)) * w[i]! + b[i]!);
}

/** y = W x + b for W [rows, cols]. */
function affine(W: { shape: number[]; data: Float64Array }, b: Float64Array, x: number[]): number[] {
  const [rows, cols] = W.shape as [number, number];
  const y: number[] = [];
  for (let r = 0; r < rows; r++) {
    let s = b[r]!;
    for (let c = 0; c < cols; c++) s += W.data[r * cols + c]! * x[c]!;
    y.push(s);
  }
  return y;
}

function gelu(x: number, kind: "erf" | "tanh"): number {
  return kind === "erf" ? 0.5 * x * (1 + erf64(x / Math.SQRT2)) : 0.5 * x * (1 + Math.tanh(Math.sqrt(2 / Math.PI) * (x + 0.044715 * x ** 3)));
}

/** Last hidden states [n][h] of one sequence. */
export function referenceHidden(t: Tensors, c: RefConfig, ids: readonly number[], types?: readonly number[]): number[][] {
  const g = (name: string) => t.get(name)!;
  const h = c.hidden;
  const D = h / c.heads;
  let x = ids.map((id, i) => {
    const row = Array.from({ length: h }, (_, j) => g("embeddings.word_embeddings.weight").data[id * h + j]! + g("embeddings.position_embeddings.weight").data[(i + (c.positionOffset ?? 0)) * h + j]! + g("embeddings.token_type_embeddings.weight").data[(types?.[i] ?? 0) * h + j]!);
    return layerNorm(row, g("embeddings.LayerNorm.weight").data, g("embeddings.LayerNorm.bias").data, c.eps);
  });
  for (let l = 0; l < c.layers; l++) {
    const p = `encoder.layer.${l}.`;
    const proj = (n: string) => x.map((r) => affine(g(`${p}attention.self.${n}.weight`), g(`${p}attention.self.${n}.bias`).data, r));
    const q = proj("query");
    const k = proj("key");
    const v = proj("value");
    const ctx = x.map((_, i) => {
      const o = new Array<number>(h).fill(0);
      for (let hd = 0; hd < c.heads; hd++) {
        const s = x.map((__, j) => {
          let d = 0;
          for (let e = 0; e < D; e++) d += q[i]![hd * D + e]! * k[j]![hd * D + e]!;
          return d / Math.sqrt(D);
        });
        const m = Math.max(...s);
        const w = s.map((z) => Math.exp(z - m));
        const sum = w.reduce((a, b) => a + b, 0);
        for (let j = 0; j < x.length; j++) for (let e = 0; e < D; e++) o[hd * D + e]! += (w[j]! / sum) * v[j]![hd * D + e]!;
      }
      return o;
    });
    x = x.map((r, i) => {
      const a = affine(g(`${p}attention.output.dense.weight`), g(`${p}attention.output.dense.bias`).data, ctx[i]!);
      return layerNorm(r.map((z, j) => z + a[j]!), g(`${p}attention.output.LayerNorm.weight`).data, g(`${p}attention.output.LayerNorm.bias`).data, c.eps);
    });
    x = x.map((r) => {
      const u = affine(g(`${p}intermediate.dense.weight`), g(`${p}intermediate.dense.bias`).data, r).map((z) => gelu(z, c.gelu));
      const d = affine(g(`${p}output.dense.weight`), g(`${p}output.dense.bias`).data, u);
      return layerNorm(r.map((z, j) => z + d[j]!), g(`${p}output.LayerNorm.weight`).data, g(`${p}output.LayerNorm.bias`).data, c.eps);
    });
  }
  return x;
}

/** y = W x for W [rows, cols] (no bias). */
function matvec(W: { shape: number[]; data: Float64Array }, x: number[]): number[] {
  return affine(W, new Float64Array(W.shape[0]!), x);
}

/** RoPE, rotate-half (GPT-NeoX / HF), on one head's vector at position p: pairs (i, i + D/2), angle p · base^(−2i/D). */
function rotate(v: number[], p: number, base: number): number[] {
  const D = v.length;
  const out = [...v];
  for (let i = 0; i < D / 2; i++) {
    const a = p * Math.fround(Math.pow(base, -(2 * i) / D));
    out[i] = v[i]! * Math.cos(a) - v[i + D / 2]! * Math.sin(a);
    out[i + D / 2] = v[i + D / 2]! * Math.cos(a) + v[i]! * Math.sin(a);
  }
  return out;
}

/** NomicBertModel (nomic-embed-text, post-norm): rotary q/k, SwiGLU MLP (fc2(fc11(x) · silu(fc12(x)))), no biases. */
export function referenceNomicHidden(t: Tensors, c: RefConfig & { theta: number }, ids: readonly number[]): number[][] {
  const g = (name: string) => t.get(name)!;
  const h = c.hidden;
  const D = h / c.heads;
  let x = ids.map((id) => {
    const row = Array.from({ length: h }, (_, j) => g("embeddings.word_embeddings.weight").data[id * h + j]! + g("embeddings.token_type_embeddings.weight").data[j]!);
    return layerNorm(row, g("emb_ln.weight").data, g("emb_ln.bias").data, c.eps);
  });
  for (let l = 0; l < c.layers; l++) {
    const p = `encoder.layers.${l}.`;
    const qkv = x.map((r) => matvec(g(`${p}attn.Wqkv.weight`), r));
    const head = (i: number, part: number, hd: number): number[] => {
      const v = qkv[i]!.slice(part * h + hd * D, part * h + (hd + 1) * D);
      return part === 2 ? v : rotate(v, i, c.theta);
    };
    const ctx = x.map((_, i) => {
      const o: number[] = [];
      for (let hd = 0; hd < c.heads; hd++) {
        const q = head(i, 0, hd);
        const s = x.map((__, j) => head(j, 1, hd).reduce((acc, kv, e) => acc + kv * q[e]!, 0) / Math.sqrt(D));
        const m = Math.max(...s);
        const w = s.map((z) => Math.exp(z - m));
        const sum = w.reduce((a, b) => a + b, 0);
        const oh = new Array<number>(D).fill(0);
        for (let j = 0; j < x.length; j++) head(j, 2, hd).forEach((vv, e) => (oh[e]! += (w[j]! / sum) * vv));
        o.push(...oh);
      }
      return o;
    });
    x = x.map((r, i) => {
      const a = matvec(g(`${p}attn.out_proj.weight`), ctx[i]!);
      return layerNorm(r.map((z, j) => z + a[j]!), g(`${p}norm1.weight`).data, g(`${p}norm1.bias`).data, c.eps);
    });
    x = x.map((r) => {
      const up = matvec(g(`${p}mlp.fc11.weight`), r);
      const gate = matvec(g(`${p}mlp.fc12.weight`), r);
      const d = matvec(g(`${p}mlp.fc2.weight`), up.map((u, k) => u * (gate[k]! / (1 + Math.exp(-gate[k]!)))));
      return layerNorm(r.map((z, j) => z + d[j]!), g(`${p}norm2.weight`).data, g(`${p}norm2.bias`).data, c.eps);
    });
  }
  return x;
}

/** sentence-transformers' Pooling (cls | mean | last) then Normalize. */
export function referencePool(hidden: number[][], mode: "cls" | "mean" | "last", normalize: boolean): number[] {
  const h = hidden[0]!.length;
  let v: number[];
  if (mode === "cls") v = [...hidden[0]!];
  else if (mode === "last") v = [...hidden[hidden.length - 1]!];
  else v = Array.from({ length: h }, (_, j) => hidden.reduce((s, r) => s + r[j]!, 0) / hidden.length);
  if (!normalize) return v;
  const n = Math.max(Math.sqrt(v.reduce((s, z) => s + z * z, 0)), 1e-12);
  return v.map((z) => z / n);
}

export function referenceEmbedding(dir: string, c: RefConfig, ids: readonly number[], mode: "cls" | "mean" | "last", normalize: boolean): number[] {
  return referencePool(referenceHidden(readF32Safetensors(join(dir, "model.safetensors")), c, ids), mode, normalize);
}

export function cosine(a: ArrayLike<number>, b: ArrayLike<number>): number {
  let ab = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < a.length; i++) {
    ab += a[i]! * b[i]!;
    aa += a[i]! * a[i]!;
    bb += b[i]! * b[i]!;
  }
  return ab / Math.sqrt(aa * bb);
}

/**
 * The float64 reference score of one encoded pair: transformers'
 * *ForSequenceClassification forward (the checkpoint's "bert." / "roberta."
 * names stripped for the encoder reference) and the activation.
 */
export function referenceScore(t: Tensors, c: RefConfig, ids: readonly number[], types: readonly number[], kind: "bert" | "roberta", activation: "sigmoid" | "identity"): number {
  const prefix = kind === "bert" ? "bert." : "roberta.";
  const stripped: Tensors = new Map([...t].filter(([n]) => n.startsWith(prefix)).map(([n, v]) => [n.slice(prefix.length), v]));
  const first = referenceHidden(stripped, c, ids, types)[0]!;
  const [dense, out] = kind === "bert" ? ["bert.pooler.dense", "classifier"] : ["classifier.dense", "classifier.out_proj"];
  const W = t.get(`${dense}.weight`)!.data;
  const b = t.get(`${dense}.bias`)!.data;
  const h = c.hidden;
  const p = Array.from({ length: h }, (_, i) => Math.tanh(b[i]! + first.reduce((s, x, k) => s + W[i * h + k]! * x, 0)));
  const logit = t.get(`${out}.bias`)!.data[0]! + p.reduce((s, x, k) => s + t.get(`${out}.weight`)!.data[k]! * x, 0);
  return activation === "sigmoid" ? 1 / (1 + Math.exp(-logit)) : logit;
}

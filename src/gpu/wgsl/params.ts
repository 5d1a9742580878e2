/**
 * The uniform block of the attention kernel (flash-attention.ts): one list of
 * field names shared by the WGSL struct and the host that fills it, so the
 * two cannot drift apart. Every field is 4 bytes (u32, i32 or f32); offsets
 * index the kernel's bindings in elements (q, k, v, plan, out, lse) or
 * 32-bit words (aux, and kvScaleOff: where an int8 cache's scales start in
 * its K and V buffers; maskOff is in bytes).
 */
export const ATTN_PARAM_FIELDS = [
  ["H", "u32"], ["Hkv", "u32"], ["G", "u32"], ["nItems", "u32"],
  ["qOff", "u32"], ["qsB", "u32"], ["qsH", "u32"], ["qsS", "u32"],
  ["kOff", "u32"], ["ksB", "u32"], ["ksH", "u32"], ["ksS", "u32"],
  ["vOff", "u32"], ["vsB", "u32"], ["vsH", "u32"], ["vsS", "u32"],
  ["scale", "f32"], ["softcap", "f32"], ["causal", "u32"], ["winL", "i32"],
  ["winR", "i32"], ["flags", "u32"], ["seqsOff", "u32"], ["itemsOff", "u32"],
  ["tableOff", "u32"], ["maxBlocks", "u32"], ["blockSize", "u32"], ["partSq", "u32"],
  ["biasOff", "u32"], ["bsB", "u32"], ["bsH", "u32"], ["bsI", "u32"],
  ["bsJ", "u32"], ["maskOff", "u32"], ["msB", "u32"], ["msH", "u32"],
  ["msI", "u32"], ["msJ", "u32"], ["alibiOff", "u32"], ["asB", "u32"],
  ["partOOff", "u32"], ["partLOff", "u32"], ["wgX", "u32"], ["chunksOff", "u32"],
  ["D", "u32"], ["kvDtype", "u32"], ["paged", "u32"], ["kvScaleOff", "u32"],
] as const;

export type AttnParamName = (typeof ATTN_PARAM_FIELDS)[number][0];
export type AttnParams = Record<AttnParamName, number>;

/** flags bits. */
export const FLAG_BIAS = 1;
export const FLAG_MASK = 2;
export const FLAG_ALIBI = 4;

export function attnParamsStruct(): string {
  return `struct Params {\n${ATTN_PARAM_FIELDS.map(([n, t]) => `  ${n}: ${t},`).join("\n")}\n}\n`;
}

/** The uniform block's bytes (a multiple of 16). */
export function packAttnParams(p: AttnParams): ArrayBuffer {
  const buf = new ArrayBuffer(Math.ceil((ATTN_PARAM_FIELDS.length * 4) / 16) * 16);
  const u = new Uint32Array(buf);
  const i = new Int32Array(buf);
  const f = new Float32Array(buf);
  ATTN_PARAM_FIELDS.forEach(([name, type], k) => {
    const v = p[name];
    if (type === "f32") f[k] = v;
    else if (type === "i32") i[k] = v;
    else {
      if (!Number.isInteger(v) || v < 0 || v > 0xffffffff) throw new RangeError(`attention param ${name} must be a u32, got ${v}`);
      u[k] = v;
    }
  });
  return buf;
}

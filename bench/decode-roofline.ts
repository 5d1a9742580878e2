/**
 * The decode roofline of a whole model, for the suites that time one engine
 * against another on the same file (gguf.ts): a decode step of one token
 * reads every weight matrix once, so it cannot run faster than the weight
 * bytes over the machine's read bandwidth (ARCHITECTURE.md "Performance
 * method": count the bytes first). Each engine is charged the bytes it
 * actually reads, which differ for the same file: kvflash holds Q8_0 as q8
 * with f32 scales (36 bytes a block of 32, against the file's 34),
 * llama.cpp reads the GGUF blocks as they are.
 *
 *   decode_gbps     = bytes per token × decode tok/s / 1e9
 *   decode_roofline = decode_gbps / read_gbps   (the all-thread read
 *                     bandwidth measured in the same run, ceilings.ts)
 *
 * A native engine can read faster than the wasm probe (AVX-512 loads,
 * prefetch instructions), so llama.cpp's fraction may pass 1.
 */
import { ArgumentError, show } from "../src/errors.js";

/** A tensor of a GGUF file's index: its name and its byte range [begin, end) (sources/gguf/reader.ts GgufTensorInfo). */
export interface GgufTensorRange {
  name: string;
  begin: number;
  end: number;
}

/** llama.cpp's name of the token embedding and of the untied LM head. */
const EMBEDDING = "token_embd.weight";
const LM_HEAD = "output.weight";

/**
 * Bytes llama.cpp reads from a GGUF file's tensors to decode one token: every
 * tensor (the layers' matrices, norms and biases, the final norm, the LM
 * head), except the token embedding when the file has its own LM head
 * (`output.weight`): then the embedding is read one row a token. With tied
 * embeddings (no `output.weight`, Qwen2.5-0.5B) the embedding is the LM head
 * and counts whole.
 */
export function ggufDecodeBytes(tensors: readonly GgufTensorRange[]): number {
  const untied = tensors.some((t) => t.name === LM_HEAD);
  let bytes = 0;
  for (const t of tensors) {
    if (!(Number.isInteger(t.begin) && Number.isInteger(t.end) && t.begin >= 0 && t.end >= t.begin)) {
      throw new ArgumentError(`tensors[${show(t.name)}]`, `must have integer byte offsets 0 ≤ begin ≤ end, got [${show(t.begin)}, ${show(t.end)})`);
    }
    if (untied && t.name === EMBEDDING) continue;
    bytes += t.end - t.begin;
  }
  return bytes;
}

/** The roofline fields of an engine's row (see the header). */
export interface DecodeRoofline {
  /** Weight bytes read per decoded token, in MB (1e6 bytes). */
  decode_mb_per_token: number;
  /** GB/s of weights the decode streamed. */
  decode_gbps: number;
  /** The read bandwidth it is divided by (GB/s). */
  read_gbps: number;
  /** decode_gbps / read_gbps. */
  decode_roofline: number;
}

function positive(name: string, v: number): number {
  if (!(Number.isFinite(v) && v > 0)) throw new ArgumentError(name, `must be a finite number > 0, got ${show(v)}`);
  return v;
}

/** Roofline fields of a decode that read `bytesPerToken` bytes a token at `decodeTokS` tokens/s, on a machine reading `readGbps` GB/s. */
export function decodeRoofline(o: { bytesPerToken: number; decodeTokS: number; readGbps: number }): DecodeRoofline {
  const bytes = positive("bytesPerToken", o.bytesPerToken);
  const tokS = positive("decodeTokS", o.decodeTokS);
  const read = positive("readGbps", o.readGbps);
  const gbps = (bytes * tokS) / 1e9;
  return { decode_mb_per_token: bytes / 1e6, decode_gbps: gbps, read_gbps: read, decode_roofline: gbps / read };
}

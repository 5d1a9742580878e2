/**
 * Which files of a hub repository a model needs, chosen from its file list.
 *
 * Safetensors (transformers' layout): the metadata kvflash reads
 * (config.json, generation_config.json, tokenizer.json, tokenizer_config.json,
 * chat_template.jinja, where present; for an embedding model also
 * sentence-transformers' modules.json, sentence_bert_config.json and each
 * module folder's config.json, such as 1_Pooling/config.json, which say how
 * it pools), then model.safetensors, or
 * model.safetensors.index.json and the shards its weight_map names. Nothing
 * else: no .bin/.pt twins, no consolidated.safetensors, no ONNX.
 *
 * GGUF (llama.cpp's -hf): the *.gguf file whose name carries the quant as a
 * word ("…-Q4_K_M.gguf", "….q4_k_m.gguf", "Q4_K_M/…"), case-insensitive;
 * without a quant, Q4_K_M as llama.cpp defaults, or the only GGUF there is.
 * A split GGUF (-00001-of-00003.gguf) comes with all its parts. mmproj
 * (vision projector) files are never the model.
 */
import { posix } from "node:path";
import { ArgumentError } from "../../errors.js";

export const METADATA_FILES = ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"] as const;
export const SINGLE_WEIGHTS = "model.safetensors";
export const WEIGHTS_INDEX = "model.safetensors.index.json";
/** llama.cpp's default tag for -hf without one. */
export const DEFAULT_QUANT = "Q4_K_M";

const SPLIT_RE = /-(\d{5})-of-(\d{5})\.gguf$/i;
const QUANT_IN_NAME_RE = /(?:^|[-._])((?:i?q[1-8](?:_[a-z0-9]+)*)|f16|fp16|bf16|f32|fp32)$/i;

export function isGguf(path: string): boolean {
  return path.toLowerCase().endsWith(".gguf") && !posix.basename(path).toLowerCase().includes("mmproj");
}

/** True when the repository has what a safetensors model directory needs at its top level. */
export function hasSafetensorsModel(files: readonly string[]): boolean {
  return files.includes("config.json") && (files.includes(SINGLE_WEIGHTS) || files.includes(WEIGHTS_INDEX));
}

/** sentence-transformers' module list and settings, and each module folder's config ("1_Pooling/config.json"). */
const SENTENCE_TRANSFORMERS_RE = /^(?:modules\.json|sentence_bert_config\.json|\d+_[A-Za-z]+\/config\.json)$/;

/** The metadata files to fetch first (those the repository has), then the index if sharded, else the single weights file. */
export function safetensorsFirstFiles(files: readonly string[]): string[] {
  const meta = [...METADATA_FILES.filter((f) => files.includes(f)), ...files.filter((f) => SENTENCE_TRANSFORMERS_RE.test(f)).sort()];
  return [...meta, files.includes(WEIGHTS_INDEX) ? WEIGHTS_INDEX : SINGLE_WEIGHTS];
}

/** The shard files an index's weight_map names (sorted, deduplicated), each checked to be a plain file name. */
export function shardsOfIndex(index: unknown, source: string): string[] {
  const map = typeof index === "object" && index !== null ? (index as Record<string, unknown>)["weight_map"] : undefined;
  if (typeof map !== "object" || map === null || Array.isArray(map)) throw new ArgumentError(`${source} weight_map`, "must be an object of tensor name → file");
  const shards = new Set<string>();
  for (const file of Object.values(map)) {
    if (typeof file !== "string" || file === "" || file.includes("/") || file.includes("\\") || file === "." || file === "..") {
      throw new ArgumentError(`${source} weight_map`, `must name files in the repository's top folder, got ${JSON.stringify(file)}`);
    }
    shards.add(file);
  }
  return [...shards].sort();
}

/** A GGUF file's quant as its name spells it ("Q4_K_M"), or its file name when the name carries none. */
export function quantOfFile(path: string): string {
  const stem = posix.basename(path).replace(SPLIT_RE, ".gguf").replace(/\.gguf$/i, "");
  const m = QUANT_IN_NAME_RE.exec(stem);
  return m ? m[1]!.toUpperCase() : posix.basename(path);
}

function matchesQuant(path: string, quant: string): boolean {
  const escaped = quant.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const stem = path.replace(SPLIT_RE, ".gguf").replace(/\.gguf$/i, "");
  return new RegExp(`(?:^|[-._/])${escaped}(?:[-./]|$)`, "i").test(stem);
}

/** The GGUF quants a file list offers, e.g. "Q4_K_M (qwen2.5-0.5b-instruct-q4_k_m.gguf), Q8_0 (…)". */
export function describeQuants(files: readonly string[]): string {
  const models = files.filter(isGguf).filter((f) => {
    const split = SPLIT_RE.exec(f);
    return split === null || Number(split[1]) === 1;
  });
  const label = (f: string): string => {
    const split = SPLIT_RE.exec(f);
    return `${quantOfFile(f)} (${f}${split === null ? "" : `, ${Number(split[2])} parts`})`;
  };
  return models.length === 0 ? "none" : models.map(label).join(", ");
}

/**
 * The GGUF file(s) to fetch for `quant` (null: the default), the first being
 * the one to load; or an ArgumentError that lists the quants there are.
 */
export function chooseGguf(repo: string, files: readonly string[], quant: string | null): string[] {
  const ggufs = files.filter(isGguf);
  const spec = quant === null ? repo : `${repo}:${quant}`;
  if (ggufs.length === 0) throw new ArgumentError("--model", `${JSON.stringify(spec)}: the repository has no .gguf files${quant === null ? " and no safetensors model (config.json with model.safetensors or its index)" : ""}`);
  let matches = ggufs.filter((f) => matchesQuant(f, quant ?? DEFAULT_QUANT));
  if (matches.length === 0 && quant === null) {
    const models = new Set(ggufs.map((f) => f.replace(SPLIT_RE, "")));
    if (models.size === 1) matches = ggufs;
  }
  if (matches.length === 0) {
    const wanted = quant === null ? `no ${DEFAULT_QUANT} (the default) and more than one GGUF file` : `no GGUF file for quant ${quant}`;
    throw new ArgumentError("--model", `${JSON.stringify(spec)}: the repository has ${wanted}; it has ${describeQuants(files)}. Pick one with ${repo}:QUANT`);
  }
  // Prefer the shallowest, then shortest path: "x-Q4_K_M.gguf" over "sub/x-Q4_K_M.gguf".
  const rank = (f: string): [number, number, string] => [f.split("/").length, f.length, f];
  matches.sort((a, b) => {
    const [da, la, sa] = rank(a);
    const [db, lb, sb] = rank(b);
    return da - db || la - lb || (sa < sb ? -1 : sa > sb ? 1 : 0);
  });
  const first = matches[0]!;
  const split = SPLIT_RE.exec(first);
  if (split === null) return [first];
  const prefix = first.slice(0, first.length - split[0].length);
  const partRe = new RegExp(`^-\\d{5}-of-${split[2]}\\.gguf$`, "i");
  const parts = ggufs.filter((f) => f.startsWith(prefix) && partRe.test(f.slice(prefix.length))).sort();
  if (parts.length !== Number(split[2])) throw new ArgumentError("--model", `${JSON.stringify(spec)}: the split GGUF ${first} has ${parts.length} of its ${Number(split[2])} parts in the repository`);
  return parts;
}

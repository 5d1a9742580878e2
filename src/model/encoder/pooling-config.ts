/**
 * How an embedding model turns its last hidden states into one vector, read
 * the way sentence-transformers reads a model directory:
 *
 *   modules.json                 [Transformer, Pooling (path "1_Pooling"), Normalize?]
 *   1_Pooling/config.json        pooling_mode_cls_token | _mean_tokens | _lasttoken (one of them)
 *   sentence_bert_config.json    max_seq_length (the encoder truncates there in sentence-transformers)
 *   config.json                  matryoshka_dimensions / is_matryoshka (vLLM's keys) for `dimensions`
 *
 * A directory without modules.json gets vLLM's default: CLS pooling for an
 * encoder, the last token for a decoder, normalized. A module we cannot run (Dense, max pooling…) is refused
 * at load, naming the file and key, rather than served with a different vector.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ArgumentError, show } from "../../errors.js";
import { readJsonFile } from "../../json-file.js";

export type PoolingMode = "cls" | "mean" | "last";
export const POOLING_MODES: readonly PoolingMode[] = ["cls", "mean", "last"];

export interface PoolingConfig {
  mode: PoolingMode;
  /** L2-normalize the pooled vector (a Normalize module). */
  normalize: boolean;
  /** sentence_bert_config.json's max_seq_length, if given. */
  maxSeqLength: number | null;
  /** Matryoshka truncation: null = not allowed; "any" = any dimension ≤ hidden; else the listed ones. */
  matryoshka: null | "any" | readonly number[];
}

const MODE_KEYS: Readonly<Record<string, PoolingMode | null>> = {
  pooling_mode_cls_token: "cls",
  pooling_mode_mean_tokens: "mean",
  pooling_mode_lasttoken: "last",
  pooling_mode_max_tokens: null,
  pooling_mode_mean_sqrt_len_tokens: null,
  pooling_mode_weightedmean_tokens: null,
};

function readPooling(path: string): PoolingMode {
  const json = readJsonFile(path) as Record<string, unknown>;
  const on = Object.keys(MODE_KEYS).filter((k) => json[k] === true);
  if (on.length !== 1) throw new ArgumentError(path, `must turn on exactly one pooling mode (${Object.keys(MODE_KEYS).join(", ")}), got ${on.length === 0 ? "none" : on.join(", ")}`);
  const mode = MODE_KEYS[on[0]!]!;
  if (mode === null) throw new ArgumentError(`${path} ${on[0]}`, `is not supported (supported: ${POOLING_MODES.join(", ")} pooling), got true`);
  return mode;
}

/** The matryoshka keys of config.json (vLLM's): a list of dimensions, or is_matryoshka: true. */
export function matryoshkaOf(config: Record<string, unknown>, source: string): PoolingConfig["matryoshka"] {
  const dims = config["matryoshka_dimensions"];
  if (dims !== undefined && dims !== null) {
    if (!Array.isArray(dims) || dims.length === 0 || dims.some((d) => typeof d !== "number" || !Number.isInteger(d) || d < 1)) {
      throw new ArgumentError(`${source} matryoshka_dimensions`, `must be a non-empty list of positive integers, got ${show(dims)}`);
    }
    return dims as number[];
  }
  return config["is_matryoshka"] === true ? "any" : null;
}

/**
 * Reads the pooling of a model directory (sentence-transformers' modules),
 * `config` being its parsed config.json; without modules.json, `fallback`
 * (vLLM's default: an encoder's CLS, a decoder's last token; normalized).
 */
export function readPoolingConfig(dir: string, config: Record<string, unknown>, fallback: { mode: PoolingMode; normalize: boolean } = { mode: "cls", normalize: true }): PoolingConfig {
  const matryoshka = matryoshkaOf(config, join(dir, "config.json"));
  const stPath = join(dir, "sentence_bert_config.json");
  let maxSeqLength: number | null = null;
  if (existsSync(stPath)) {
    const v = (readJsonFile(stPath) as Record<string, unknown>)["max_seq_length"];
    if (v !== undefined && v !== null) {
      if (typeof v !== "number" || !Number.isInteger(v) || v < 1) throw new ArgumentError(`${stPath} max_seq_length`, `must be a positive integer, got ${show(v)}`);
      maxSeqLength = v;
    }
  }
  const modulesPath = join(dir, "modules.json");
  if (!existsSync(modulesPath)) return { ...fallback, maxSeqLength, matryoshka };
  const modules = readJsonFile(modulesPath);
  if (!Array.isArray(modules)) throw new ArgumentError(modulesPath, `must be a list of modules, got ${show(modules)}`);
  let mode: PoolingMode | null = null;
  let normalize = false;
  modules.forEach((m: unknown, i) => {
    const type = typeof m === "object" && m !== null ? (m as Record<string, unknown>)["type"] : undefined;
    const path = typeof m === "object" && m !== null ? (m as Record<string, unknown>)["path"] : undefined;
    const kind = typeof type === "string" ? type.split(".").pop() : undefined;
    if (kind === "Transformer") return;
    if (kind === "Normalize") return void (normalize = true);
    if (kind === "Pooling") {
      if (typeof path !== "string" || path === "" || path.includes("..")) throw new ArgumentError(`${modulesPath}[${i}].path`, `must be the Pooling module's folder, got ${show(path)}`);
      mode = readPooling(join(dir, path, "config.json"));
      return;
    }
    throw new ArgumentError(`${modulesPath}[${i}].type`, `must be a Transformer, Pooling or Normalize module (others, such as Dense, are not supported), got ${show(type)}`);
  });
  if (mode === null) throw new ArgumentError(modulesPath, "has no sentence_transformers.models.Pooling module");
  return { mode, normalize, maxSeqLength, matryoshka };
}

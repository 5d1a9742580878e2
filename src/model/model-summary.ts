/**
 * What `kvflash show` prints about a model source (as `ollama show` does):
 * architecture, parameter count, quant, context length, chat template, files
 * and size, and whether kvflash can run it. Reads metadata only — config.json,
 * tokenizer_config.json and safetensors headers of a directory, the header of
 * a GGUF file — never the weights, and never the network. Raw values are
 * reported as the files give them, so a model kvflash cannot run is still
 * described (with the reason under `supported`).
 */
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { basename, dirname, join, relative, sep } from "node:path";
import { readJsonFile } from "../json-file.js";
import { openGgufModel } from "./gguf/gguf-model.js";
import { readGgufHeader } from "../sources/gguf/reader.js";
import { openModelDir } from "./model-dir.js";
import { readSafetensorsHeader } from "../sources/safetensors.js";
import type { ModelSource } from "../sources/source.js";

export interface ModelSummary {
  format: "safetensors" | "gguf";
  /** The model's own name for its architecture: config.json architectures[0] (model_type), or GGUF general.architecture. */
  architecture: string;
  /** GGUF general.name, or null. */
  name: string | null;
  /** Elements of every weight tensor. */
  parameters: number;
  /** GGUF: general.file_type's name (Q4_K_M, …), else the tensor type holding most bytes; safetensors: the weights' dtype(s). */
  quant: string;
  /** Tensors per storage type, e.g. { Q4_K: 144, F32: 65 }. */
  tensorTypes: Record<string, number>;
  /** Context length the model was trained for (max_position_embeddings, GGUF <arch>.context_length), or null. */
  contextLength: number | null;
  template: TemplateSummary | null;
  /** The files that make the model: the directory's, or the GGUF file (all parts of a split one); repository-relative sizes. */
  files: { path: string; bytes: number }[];
  bytes: number;
  /** "yes", or why kvflash cannot load it. */
  supported: string;
}

export interface TemplateSummary {
  /** Where it is: "tokenizer_config.json", "chat_template.jinja" or "tokenizer.chat_template" (GGUF). */
  origin: string;
  /** Names of the templates when there are several (tokenizer_config's list), else []. */
  names: string[];
  /** The family a default template is written for (llama.cpp's llm_chat_detect_template signatures), or null. */
  family: string | null;
  /** The first non-empty line of the default template, cut to 100 characters. */
  firstLine: string;
}

/** llama.cpp's llm_chat_detect_template, its clearest signatures, in its order of checks. */
const TEMPLATE_FAMILIES: readonly [string, (t: string) => boolean][] = [
  ["chatml", (t) => t.includes("<|im_start|>")],
  ["llama3", (t) => t.includes("<|start_header_id|>") && t.includes("<|end_header_id|>")],
  ["gemma", (t) => t.includes("<start_of_turn>")],
  ["phi3", (t) => t.includes("<|assistant|>") && t.includes("<|end|>")],
  ["zephyr", (t) => t.includes("<|user|>") && t.includes("<|assistant|>")],
  ["mistral", (t) => t.includes("[INST]") && !t.includes("<<SYS>>")],
  ["llama2", (t) => t.includes("[INST]")],
];

export function templateSummary(source: string, origin: string, names: string[] = []): TemplateSummary {
  const first = source.split("\n").find((l) => l.trim() !== "")?.trim() ?? "";
  return {
    origin,
    names,
    family: TEMPLATE_FAMILIES.find(([, test]) => test(source))?.[0] ?? null,
    firstLine: first.length <= 100 ? first : `${first.slice(0, 100)}…`,
  };
}

/** llama.cpp's llama_ftype names (general.file_type), the ones files carry. */
const FILE_TYPES: Readonly<Record<number, string>> = {
  0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L",
  14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS",
  23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M",
  32: "BF16", 36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE",
};

export function summarizeModel(source: ModelSource): ModelSummary {
  return source.kind === "gguf" ? summarizeGguf(source.path) : summarizeDir(source.path);
}

const reason = (f: () => unknown): string => {
  try {
    f();
    return "yes";
  } catch (e) {
    return `no: ${(e as Error).message}`;
  }
};

function summarizeGguf(path: string): ModelSummary {
  const header = readGgufHeader(path);
  const meta = header.metadata;
  const str = (key: string): string | null => {
    const v = meta.get(key);
    return typeof v === "string" ? v : null;
  };
  const arch = str("general.architecture") ?? "unknown";
  const tensorTypes: Record<string, number> = {};
  const typeBytes = new Map<string, number>();
  let parameters = 0;
  for (const t of header.tensors) {
    tensorTypes[t.type.name] = (tensorTypes[t.type.name] ?? 0) + 1;
    typeBytes.set(t.type.name, (typeBytes.get(t.type.name) ?? 0) + (t.end - t.begin));
    parameters += t.numel;
  }
  const fileType = meta.get("general.file_type");
  const dominant = [...typeBytes].sort((a, b) => b[1] - a[1])[0]?.[0] ?? "none";
  const quant = typeof fileType === "number" && FILE_TYPES[fileType] !== undefined ? FILE_TYPES[fileType]! : dominant;
  const context = meta.get(`${arch}.context_length`);
  const template = str("tokenizer.chat_template");
  const files = ggufParts(path).map((p) => ({ path: basename(p), bytes: statSync(p).size }));
  return {
    format: "gguf",
    architecture: arch,
    name: str("general.name"),
    parameters,
    quant,
    tensorTypes,
    contextLength: typeof context === "number" ? context : null,
    template: template === null ? null : templateSummary(template, "tokenizer.chat_template"),
    files,
    bytes: files.reduce((s, f) => s + f.bytes, 0),
    supported: reason(() => openGgufModel(path)),
  };
}

/** A split GGUF's parts (name-00001-of-00003.gguf …) that are beside it, else the file alone. */
function ggufParts(path: string): string[] {
  const m = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/i.exec(basename(path));
  if (m === null) return [path];
  const n = Number(m[3]);
  const parts = Array.from({ length: n }, (_, i) => join(dirname(path), `${m[1]}-${String(i + 1).padStart(5, "0")}-of-${m[3]}.gguf`));
  return parts.filter((p) => existsSync(p));
}

function summarizeDir(dir: string): ModelSummary {
  const config = readJsonFile(join(dir, "config.json")) as Record<string, unknown>;
  const architectures = config["architectures"];
  const arch = Array.isArray(architectures) && typeof architectures[0] === "string" ? architectures[0] : null;
  const modelType = typeof config["model_type"] === "string" ? config["model_type"] : null;
  const tensorTypes: Record<string, number> = {};
  let parameters = 0;
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".safetensors")).sort()) {
    for (const t of readSafetensorsHeader(join(dir, file)).tensors) {
      const type = t.dtype.toUpperCase();
      tensorTypes[type] = (tensorTypes[type] ?? 0) + 1;
      parameters += t.shape.reduce((a, b) => a * b, 1);
    }
  }
  const quantConfig = config["quantization_config"];
  const method = typeof quantConfig === "object" && quantConfig !== null ? (quantConfig as Record<string, unknown>)["quant_method"] : undefined;
  const quant = typeof method === "string" ? method : Object.keys(tensorTypes).sort().join("+") || "none";
  const context = config["max_position_embeddings"];
  const files = filesUnder(dir);
  return {
    format: "safetensors",
    architecture: arch !== null && modelType !== null ? `${arch} (${modelType})` : (arch ?? modelType ?? "unknown"),
    name: null,
    parameters,
    quant,
    tensorTypes,
    contextLength: typeof context === "number" ? context : null,
    template: dirTemplate(dir),
    files,
    bytes: files.reduce((s, f) => s + f.bytes, 0),
    supported: reason(() => openModelDir(dir)),
  };
}

function dirTemplate(dir: string): TemplateSummary | null {
  const jinja = join(dir, "chat_template.jinja");
  if (existsSync(jinja)) return templateSummary(readFileSync(jinja, "utf8"), "chat_template.jinja");
  const configPath = join(dir, "tokenizer_config.json");
  if (!existsSync(configPath)) return null;
  const raw = (readJsonFile(configPath) as Record<string, unknown>)["chat_template"];
  if (typeof raw === "string") return templateSummary(raw, "tokenizer_config.json");
  if (!Array.isArray(raw)) return null;
  const named = raw.filter((e): e is { name: string; template: string } => typeof e?.name === "string" && typeof e?.template === "string");
  const main = named.find((e) => e.name === "default") ?? named[0];
  return main === undefined ? null : templateSummary(main.template, "tokenizer_config.json", named.map((e) => e.name));
}

/** Files under `dir` (links followed: a hub snapshot's files are links to blobs), sorted, with their sizes. */
function filesUnder(dir: string): { path: string; bytes: number }[] {
  const out: { path: string; bytes: number }[] = [];
  const walk = (d: string): void => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      if (!existsSync(p)) continue; // a dangling link
      const st = statSync(p);
      if (st.isDirectory()) walk(p);
      else out.push({ path: relative(dir, p).split(sep).join("/"), bytes: st.size });
    }
  };
  walk(dir);
  return out;
}

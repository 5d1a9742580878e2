/**
 * What a `--model` argument names, when it is not a local path:
 *
 *   org/name                 a Hugging Face repository (safetensors, or GGUF files)
 *   org/name:Q4_K_M          a GGUF file of the repository, chosen by quant (as llama.cpp's -hf)
 *   org/name/dir/file.gguf   one GGUF file of the repository, by path
 *
 * An optional "hf.co/" or "huggingface.co/" in front is dropped (Ollama's
 * spelling). Repository names follow the hub's rules: letters, digits, "-",
 * "_" and "."; no "--" or "..".
 */
import { ArgumentError } from "../../errors.js";
import { isSafeRepoPath } from "./hub-client.js";

export interface HubModelSpec {
  /** "org/name" */
  repo: string;
  /** A GGUF quant to pick, e.g. "Q4_K_M" (case as the user typed it). */
  quant?: string;
  /** A file of the repository to load, e.g. "qwen2.5-0.5b-instruct-q4_k_m.gguf". */
  file?: string;
}

const PART_RE = /^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?$/;
const QUANT_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

/** A hub spec, or null if `spec` cannot be one (then it can only be a local path). */
export function parseHubSpec(spec: string): HubModelSpec | null {
  const s = spec.replace(/^(?:https?:\/\/)?(?:hf\.co|huggingface\.co)\//, "");
  if (s.startsWith(".") || s.startsWith("/") || s.startsWith("~") || s.includes("\\")) return null;
  const [path, quant, ...extra] = s.split(":");
  if (path === undefined || extra.length > 0) return null;
  const parts = path.split("/");
  if (parts.length < 2) return null;
  const [org, name, ...rest] = parts as [string, string, ...string[]];
  const repo = `${org}/${name}`;
  if (!isRepoId(repo)) return null;
  if (rest.length > 0) {
    const file = rest.join("/");
    if (quant !== undefined || !isSafeRepoPath(file) || !file.toLowerCase().endsWith(".gguf")) return null;
    return { repo, file };
  }
  if (quant !== undefined) {
    if (!QUANT_RE.test(quant)) throw new ArgumentError("--model", `quant after ":" must be a name such as Q4_K_M, got ${JSON.stringify(quant)} in ${JSON.stringify(spec)}`);
    return { repo, quant };
  }
  return { repo };
}

/** org/name with the hub's naming rules (at most 96 characters a part, no "--" or ".."). */
export function isRepoId(repo: string): boolean {
  const parts = repo.split("/");
  return parts.length === 2 && parts.every((p) => p.length <= 96 && PART_RE.test(p) && !p.includes("--") && !p.includes(".."));
}

/** The spec as a string again (for messages and `kvflash ls`). */
export function formatHubSpec(spec: HubModelSpec): string {
  return spec.file !== undefined ? `${spec.repo}/${spec.file}` : spec.quant !== undefined ? `${spec.repo}:${spec.quant}` : spec.repo;
}

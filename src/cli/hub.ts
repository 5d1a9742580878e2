/**
 * `kvflash pull` and `kvflash ls`: the Hugging Face cache from the command
 * line (as `ollama pull` / `ollama list`, over huggingface_hub's cache so
 * huggingface-cli and vLLM see the same files). Also resolveModelArg, which
 * turns serve's and generate's `--model` into a path before the engine starts.
 */
import { formatBytes } from "../runtime/allocator.js";
import { ArgumentError } from "../errors.js";
import { HubCache } from "../sources/hub/hub-cache.js";
import { hubSettings } from "../sources/hub/hub-settings.js";
import { type ResolvedModel, resolveModelSource } from "../sources/source.js";
import { walkFlags } from "./flags.js";

export const PULL_USAGE = `usage: kvflash pull SPEC [--revision REV]

  Downloads a model into the Hugging Face cache without serving it, and prints
  the path to give --model (the spec itself works as --model too).

  SPEC is one of
    org/name                  a safetensors repository: config, tokenizer and weights only
    org/name:Q4_K_M           a GGUF file of the repository, by quant (case-insensitive)
    org/name/file.gguf        a GGUF file of the repository, by path
  --revision REV              branch, tag or commit hash (default main)

  Environment: HF_TOKEN (gated or private repos), HF_ENDPOINT (a mirror),
  HF_HUB_CACHE or HF_HOME (where the cache is), HF_HUB_OFFLINE=1 (no network).
`;

export const LS_USAGE = `usage: kvflash ls [--json]

  Lists the models in the Hugging Face cache ($HF_HUB_CACHE, $HF_HOME/hub or
  ~/.cache/huggingface/hub): repository, revision, commit, files and size.

  --json                      one JSON array instead of the table
`;

const err = (line: string): void => void process.stderr.write(`kvflash: ${line}\n`);

/**
 * `--model` (and `--revision`) as a path the loader takes: a local path as it
 * is, a hub spec from the cache or downloaded with a progress bar.
 */
export async function resolveModelArg(model: string, revision: string | undefined, log: (line: string) => void = err): Promise<ResolvedModel> {
  // The bar on a TTY, a line per 10 % in a log: a download can take minutes either way.
  const resolved = await resolveModelSource(model, { ...(revision === undefined ? {} : { revision }), progress: true, log });
  if (resolved.from === "local" && revision !== undefined) throw new ArgumentError("--revision", `applies to hub repositories, but --model ${JSON.stringify(model)} is a local path`);
  if (resolved.hub !== undefined) log(`${model} → ${resolved.source.path} (${resolved.from === "cache" ? "from the cache" : "from the hub"}, commit ${resolved.hub.commit.slice(0, 10)})`);
  return resolved;
}

export async function pullCommand(argv: readonly string[]): Promise<number> {
  const spec = argv[0];
  if (spec === undefined || spec.startsWith("--")) throw new ArgumentError("SPEC", `is required (org/name, org/name:QUANT or org/name/file.gguf)\n${PULL_USAGE}`);
  let revision: string | undefined;
  walkFlags(argv.slice(1), { usage: PULL_USAGE, what: "a pull option" }, (flag, read) => {
    if (flag !== "--revision") return false;
    revision = read.string();
    return true;
  });
  const settings = hubSettings();
  if (settings.offline) throw new ArgumentError("HF_HUB_OFFLINE", "is set: kvflash pull needs the network (unset it, or use --model with what is already cached)");
  const resolved = await resolveModelSource(spec, { ...(revision === undefined ? {} : { revision }), settings, refresh: true, progress: true, log: err });
  if (resolved.hub === undefined) throw new ArgumentError("SPEC", `${JSON.stringify(spec)} is a local path; pull takes a hub repository (org/name)`);
  err(`${spec} is in ${settings.cacheDir} (commit ${resolved.hub.commit.slice(0, 10)}); serve it with: kvflash serve --model ${spec}${revision === undefined ? "" : ` --revision ${revision}`}`);
  process.stdout.write(`${resolved.source.path}\n`);
  return 0;
}

export function lsCommand(argv: readonly string[]): number {
  let json = false;
  walkFlags(argv, { usage: LS_USAGE, what: "an ls option", switches: ["--json"] }, (flag) => {
    if (flag !== "--json") return false;
    json = true;
    return true;
  });
  const { cacheDir } = hubSettings();
  const rows = new HubCache(cacheDir).list().flatMap((r) =>
    r.snapshots.map((s) => ({ repo: r.repo, revisions: s.refs, commit: s.commit, files: s.files, bytes: s.bytes, path: s.dir })),
  );
  if (json) {
    process.stdout.write(`${JSON.stringify(rows)}\n`);
    return 0;
  }
  if (rows.length === 0) {
    process.stdout.write(`no models in ${cacheDir} (get one with: kvflash pull org/name)\n`);
    return 0;
  }
  const table = [["REPO", "REVISION", "COMMIT", "FILES", "SIZE", "MODEL FILES"]];
  for (const r of rows) {
    const models = r.files.filter((f) => f.endsWith(".gguf") || f.endsWith(".safetensors"));
    table.push([r.repo, r.revisions.join(",") || "-", r.commit.slice(0, 10), String(r.files.length), formatBytes(r.bytes), models.join(", ") || "-"]);
  }
  const widths = table[0]!.map((_, c) => Math.max(...table.map((row) => row[c]!.length)));
  for (const row of table) process.stdout.write(`${row.map((cell, c) => (c === row.length - 1 ? cell : cell.padEnd(widths[c]!))).join("  ")}\n`);
  process.stdout.write(`(${cacheDir})\n`);
  return 0;
}

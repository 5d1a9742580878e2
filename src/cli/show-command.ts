/**
 * `kvflash show MODEL`: what a model is, from its metadata (as `ollama show`):
 * architecture, parameters, quant, context length, chat template, files and
 * size, and whether kvflash runs it (model/model-summary.ts). MODEL is what
 * --model takes — a directory, a .gguf file, or a hub spec — but a hub spec
 * is read from the cache only: show never downloads, so it works offline.
 */
import { ArgumentError } from "../errors.js";
import { HubCache } from "../sources/hub/hub-cache.js";
import { hubSettings } from "../sources/hub/hub-settings.js";
import { formatHubSpec, parseHubSpec } from "../sources/hub/model-spec.js";
import { modelInSnapshot } from "../sources/hub/snapshot-model.js";
import { type ModelSummary, summarizeModel } from "../model/model-summary.js";
import { type ModelSource, localModelSource } from "../sources/source.js";
import { formatBytes } from "../runtime/allocator.js";
import { walkFlags } from "./flags.js";

export const SHOW_USAGE = `usage: kvflash show MODEL [--revision REV] [--json]

  Describes a model without loading it: architecture, parameters, quant,
  context length, chat template, files and size, and whether kvflash runs it.

  MODEL                       a model directory, a .gguf file, or a Hugging Face repository in the
                              cache (org/name, org/name:Q4_K_M, org/name/file.gguf); never downloads
  --revision REV              with a hub MODEL: branch, tag or commit hash (default main)
  --json                      one JSON object instead of the text
`;

interface Shown {
  model: string;
  path: string;
  /** For a hub spec: where in the cache. */
  hub: { repo: string; revision: string; commit: string } | null;
  summary: ModelSummary;
}

export function showCommand(argv: readonly string[]): number {
  const model = argv[0];
  if (model === undefined || model.startsWith("--")) throw new ArgumentError("MODEL", `is required (a directory, a .gguf file or org/name)\n${SHOW_USAGE}`);
  let revision: string | undefined;
  let json = false;
  walkFlags(argv.slice(1), { usage: SHOW_USAGE, what: "a show option", switches: ["--json"] }, (flag, read) => {
    if (flag === "--json") json = true;
    else if (flag === "--revision") revision = read.string();
    else return false;
    return true;
  });
  const { source, hub } = cachedModelSource(model, revision);
  const shown: Shown = { model, path: source.path, hub, summary: summarizeModel(source) };
  process.stdout.write(json ? `${JSON.stringify(shown)}\n` : formatShown(shown));
  return 0;
}

/** A local path as it is, or a hub spec complete in the cache at the revision; never the network. */
function cachedModelSource(model: string, revision: string | undefined): { source: ModelSource; hub: Shown["hub"] } {
  const local = localModelSource(model);
  if (local !== null) {
    if (revision !== undefined) throw new ArgumentError("--revision", `applies to hub repositories, but MODEL ${JSON.stringify(model)} is a local path`);
    return { source: local, hub: null };
  }
  const spec = parseHubSpec(model);
  if (spec === null) throw new ArgumentError("MODEL", `${JSON.stringify(model)}: no such file or directory, and not a Hugging Face spec (org/name, org/name:Q4_K_M or org/name/file.gguf)`);
  const rev = revision ?? "main";
  const cache = new HubCache(hubSettings().cacheDir);
  const commit = cache.commitOf(spec.repo, rev);
  const source = commit === null ? null : modelInSnapshot(cache, spec, commit);
  if (source === null) {
    const name = formatHubSpec(spec);
    const where = commit === null ? `has no snapshot of ${spec.repo} at revision ${rev}` : `has ${spec.repo} at ${rev} (commit ${commit.slice(0, 10)}) but not all of ${name}`;
    throw new ArgumentError("MODEL", `${JSON.stringify(name)}: the Hugging Face cache (${cache.dir}) ${where}; show reads the cache only: kvflash pull ${name} first`);
  }
  return { source, hub: { repo: spec.repo, revision: rev, commit: commit! } };
}

/** 494.03M, 1.54B: parameters as model cards write them. */
export function formatCount(n: number): string {
  if (n >= 1e9) return `${(n / 1e9).toFixed(2)}B`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(2)}M`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(2)}K`;
  return String(n);
}

function formatShown({ model, path, hub, summary: s }: Shown): string {
  const t = s.template;
  const rows: [string, string][] = [
    ["model", hub === null ? model : `${model} (revision ${hub.revision}, commit ${hub.commit.slice(0, 10)})`],
    ["path", path],
    ["format", s.format],
    ["architecture", s.name === null ? s.architecture : `${s.architecture} (${s.name})`],
    ["parameters", formatCount(s.parameters)],
    ["quant", `${s.quant} (tensors: ${Object.entries(s.tensorTypes).map(([k, n]) => `${k} ${n}`).join(", ")})`],
    ["context length", s.contextLength === null ? "-" : String(s.contextLength)],
    ["chat template", t === null ? "none" : `${t.family ?? "unrecognized"} (${t.origin}${t.names.length > 1 ? `; ${t.names.join(", ")}` : ""}): ${t.firstLine}`],
    ["supported", s.supported],
    ["files", `${s.files.length}, ${formatBytes(s.bytes)}`],
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  const nameWidth = Math.max(0, ...s.files.map((f) => f.path.length));
  const files = s.files.map((f) => `${" ".repeat(width)}    ${f.path.padEnd(nameWidth)}  ${formatBytes(f.bytes)}`);
  return `${[...rows.map(([k, v]) => `${k.padEnd(width)}  ${v}`), ...files].join("\n")}\n`;
}

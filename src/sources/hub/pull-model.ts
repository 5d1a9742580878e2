/**
 * Downloads what a hub spec needs into the cache (huggingface_hub's
 * snapshot_download with allow_patterns, narrowed to the files the model
 * needs): asks the hub which commit the revision is and what files it has,
 * picks the files (repo-files.ts), fetches the small ones, then the weights
 * under one progress bar, and writes refs/<revision> last.
 */
import { join } from "node:path";
import { readJsonFile } from "../../json-file.js";
import { formatBytes } from "../../runtime/allocator.js";
import { LoadProgress, type ProgressOptions } from "../progress.js";
import type { ModelSource } from "../model-source.js";
import { type FileMeta, type HubClient, HubError } from "./hub-client.js";
import type { HubCache } from "./hub-cache.js";
import { downloadFile } from "./hub-download.js";
import type { HubModelSpec } from "./model-spec.js";
import { SINGLE_WEIGHTS, WEIGHTS_INDEX, chooseGguf, describeQuants, hasSafetensorsModel, safetensorsFirstFiles, shardsOfIndex } from "./repo-files.js";

export interface PullModelOptions {
  client: HubClient;
  cache: HubCache;
  spec: HubModelSpec;
  /** Branch, tag or commit hash. */
  revision: string;
  /** The download progress bar (LoadProgress options). Default: only when stderr is a TTY. */
  progress?: boolean | ProgressOptions;
  log?: (line: string) => void;
}

export interface PulledModel {
  source: ModelSource;
  commit: string;
  /** Repository paths now in the snapshot for this model. */
  files: string[];
  /** Bytes fetched over the network in this call. */
  downloadedBytes: number;
}

export async function pullModel(options: PullModelOptions): Promise<PulledModel> {
  const { client, cache, spec, revision } = options;
  const log = options.log ?? (() => {});
  const { repo } = spec;
  const info = await client.repoInfo(repo, revision);
  const snapshot = cache.snapshotDir(repo, info.commit);

  // The small files first (for safetensors, the index tells which shards to get), then the weights.
  let small: string[] = [];
  let weights: string[];
  let kind: ModelSource["kind"] = "gguf";
  if (spec.file !== undefined) {
    if (!info.files.includes(spec.file)) {
      throw new HubError("not-found", `${repo} has no file ${JSON.stringify(spec.file)} at ${revision}; its GGUF files: ${describeQuants(info.files)}`, 404);
    }
    weights = [spec.file];
  } else if (spec.quant === undefined && hasSafetensorsModel(info.files)) {
    kind = "dir";
    const first = safetensorsFirstFiles(info.files);
    small = first.filter((f) => f !== SINGLE_WEIGHTS);
    weights = first.includes(SINGLE_WEIGHTS) ? [SINGLE_WEIGHTS] : []; // sharded: the index names them below
  } else {
    weights = chooseGguf(repo, info.files, spec.quant ?? null);
  }

  const metas = async (paths: readonly string[]): Promise<FileMeta[]> => {
    const out: FileMeta[] = [];
    for (const p of paths) out.push(await client.fileMeta(repo, info.commit, p));
    return out;
  };
  let downloadedBytes = 0;
  for (const meta of await metas(small)) downloadedBytes += (await downloadFile({ client, cache, repo, commit: info.commit, meta })).fetched;
  if (small.includes(WEIGHTS_INDEX)) {
    const indexPath = join(snapshot, WEIGHTS_INDEX);
    weights = shardsOfIndex(readJsonFile(indexPath), `${repo}/${WEIGHTS_INDEX}`);
    const inRepo = new Set(info.files); // linear in shards + files, for an index naming thousands of shards
    const missing = weights.filter((s) => !inRepo.has(s));
    if (missing.length > 0) throw new HubError("not-found", `${repo}/${WEIGHTS_INDEX} names shards the repository does not have at ${revision}: ${missing.join(", ")}`, 404);
  }

  const weightMetas = await metas(weights);
  const total = weightMetas.reduce((s, m) => s + m.size, 0);
  const cached = weightMetas.filter((m) => cache.blobComplete(repo, m.etag, m.size)).reduce((s, m) => s + m.size, 0);
  const names = weights.length <= 3 ? weights.join(", ") : `${weights.length} files, ${weights[0]} … ${weights[weights.length - 1]}`;
  log(`${repo} @ ${revision} (commit ${info.commit.slice(0, 10)}): ${names} — ${formatBytes(total)}${cached > 0 ? `, ${formatBytes(cached)} already in the cache` : ""}`);
  const p = options.progress;
  const progress = new LoadProgress(total, { label: `downloading ${repo}`, ...(typeof p === "object" ? p : p === undefined ? {} : { enabled: p }) });
  try {
    for (const meta of weightMetas) downloadedBytes += (await downloadFile({ client, cache, repo, commit: info.commit, meta, progress })).fetched;
  } finally {
    progress.finish();
  }
  cache.writeRef(repo, revision, info.commit);
  const source: ModelSource = kind === "dir" ? { kind, path: snapshot } : { kind, path: join(snapshot, weights[0]!) };
  return { source, commit: info.commit, files: [...small, ...weights], downloadedBytes };
}

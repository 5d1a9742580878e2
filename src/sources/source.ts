/**
 * `--model` resolved once, at the edge, into one ModelSource: the loader
 * below never knows where the bytes came from (ARCHITECTURE.md, "Models come
 * from where users keep them"). The spec is, in this order:
 *
 *   1. a local path: a model directory, or a .gguf file;
 *   2. a hub spec (org/name, org/name:Q4_K_M, org/name/file.gguf) already
 *      complete in the Hugging Face cache at the revision → no network;
 *   3. the same, downloaded into that cache (unless HF_HUB_OFFLINE).
 *
 * As llama.cpp's -hf and Ollama do, a cached model is used as it is;
 * `kvflash pull` (refresh: true) asks the hub for the revision's newest commit.
 */
import { closeSync, existsSync, openSync, readSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { ArgumentError } from "../errors.js";
import { HubCache } from "./hub/hub-cache.js";
import { HubClient, HubError } from "./hub/hub-client.js";
import { type HubSettings, hubSettings } from "./hub/hub-settings.js";
import { type HubModelSpec, formatHubSpec, parseHubSpec } from "./hub/model-spec.js";
import { pullModel } from "./hub/pull-model.js";
import { modelInSnapshot } from "./hub/snapshot-model.js";
import type { ProgressOptions } from "./progress.js";
import type { ModelSource } from "./model-source.js";

export type { ModelSource };

export interface ResolvedModel {
  source: ModelSource;
  /** Where it came from: "local", "cache" (no request made) or "hub" (checked or downloaded now). */
  from: "local" | "cache" | "hub";
  /** For a hub spec: the repository and the commit the files are from. */
  hub?: { repo: string; revision: string; commit: string };
}

export interface ResolveModelOptions {
  /** Branch, tag or commit hash of a hub repository. Default "main". */
  revision?: string;
  /** Hub endpoint, cache, token, offline. Default hubSettings(process.env). */
  settings?: HubSettings;
  /** Ask the hub for the revision's commit even when the cache has the model (kvflash pull). */
  refresh?: boolean;
  /** The download progress bar. Default: only when stderr is a TTY. */
  progress?: boolean | ProgressOptions;
  /** One line per step worth telling the user (what is fetched, from where). */
  log?: (line: string) => void;
}

const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32

/** A local file that is GGUF by name or by its first four bytes. */
function isGgufFile(path: string): boolean {
  if (path.toLowerCase().endsWith(".gguf")) return true;
  const fd = openSync(path, "r");
  try {
    const head = Buffer.alloc(4);
    return readSync(fd, head, 0, 4, 0) === 4 && head.readUInt32LE(0) === GGUF_MAGIC;
  } finally {
    closeSync(fd);
  }
}

/** A local path's ModelSource, or null if nothing is there. `name` is the argument errors name. */
export function localModelSource(spec: string, name = "--model"): ModelSource | null {
  const path = resolve(spec.startsWith("~/") ? join(homedir(), spec.slice(2)) : spec);
  if (!existsSync(path)) return null;
  if (statSync(path).isDirectory()) return { kind: "dir", path };
  if (isGgufFile(path)) return { kind: "gguf", path };
  throw new ArgumentError(name, `${JSON.stringify(spec)} is a file but not a GGUF file; give a model directory, a .gguf file, or a hub repository (org/name)`);
}

/**
 * The ModelSource of a library call given a local path rather than a source
 * (loadModel(rt, path), serve({ modelDir })): resolved here, once, at that
 * call's edge, as `--model` is. `name` is the argument errors name.
 */
export function localModelSourceOf(path: string, name: string): ModelSource {
  if (typeof path !== "string" || path === "") throw new ArgumentError(name, `must be a model directory or a .gguf file, got ${JSON.stringify(path)}`);
  const source = localModelSource(path, name);
  if (source === null) throw new ArgumentError(name, `${JSON.stringify(path)}: no such file or directory`);
  return source;
}

export async function resolveModelSource(spec: string, options: ResolveModelOptions = {}): Promise<ResolvedModel> {
  if (typeof spec !== "string" || spec.trim() === "") throw new ArgumentError("--model", `must be a directory, a .gguf file or org/name, got ${JSON.stringify(spec)}`);
  const local = localModelSource(spec);
  if (local !== null) return { source: local, from: "local" };
  const hub = parseHubSpec(spec);
  if (hub === null) {
    throw new ArgumentError(
      "--model",
      `${JSON.stringify(spec)}: no such file or directory, and not a Hugging Face spec (org/name, org/name:Q4_K_M or org/name/file.gguf)`,
    );
  }
  return resolveHubModel(hub, options);
}

async function resolveHubModel(spec: HubModelSpec, options: ResolveModelOptions): Promise<ResolvedModel> {
  const settings = options.settings ?? hubSettings();
  const revision = options.revision ?? "main";
  if (revision === "" || revision.split("/").some((s) => s === "" || s === "." || s === "..")) throw new ArgumentError("--revision", `must be a branch, tag or commit hash, got ${JSON.stringify(revision)}`);
  const cache = new HubCache(settings.cacheDir);
  const name = formatHubSpec(spec);
  const commit = cache.commitOf(spec.repo, revision);
  const cached = commit === null ? null : modelInSnapshot(cache, spec, commit);
  const fromCache = (): ResolvedModel => ({ source: cached!, from: "cache", hub: { repo: spec.repo, revision, commit: commit! } });
  if (cached !== null && !(options.refresh === true && !settings.offline)) return fromCache();
  if (settings.offline) {
    const where = commit === null ? `has no snapshot of ${spec.repo} at revision ${revision}` : `has ${spec.repo} at ${revision} (commit ${commit.slice(0, 10)}) but not all of ${name}`;
    throw new ArgumentError(
      "--model",
      `${JSON.stringify(name)}: HF_HUB_OFFLINE is set and the Hugging Face cache (${settings.cacheDir}) ${where}. ` +
        `Download it first with network (kvflash pull ${name}${revision === "main" ? "" : ` --revision ${revision}`}), or unset HF_HUB_OFFLINE`,
    );
  }
  const client = new HubClient(settings);
  try {
    const pulled = await pullModel({
      client,
      cache,
      spec,
      revision,
      ...(options.progress === undefined ? {} : { progress: options.progress }),
      ...(options.log === undefined ? {} : { log: options.log }),
    });
    return { source: pulled.source, from: "hub", hub: { repo: spec.repo, revision, commit: pulled.commit } };
  } catch (e) {
    // huggingface_hub's fallback: no network, but the cache has it → use the cache.
    if (e instanceof HubError && e.kind === "network" && cached !== null) {
      options.log?.(`${e.message}; using the cached snapshot ${commit!.slice(0, 10)}`);
      return fromCache();
    }
    throw e;
  }
}

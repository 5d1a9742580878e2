/**
 * Removing a model from the Hugging Face cache (`kvflash rm`, as `ollama rm`;
 * huggingface-cli's delete-cache does the same by revision), in
 * huggingface_hub's layout (hub-cache.ts):
 *
 *   org/name                the whole repository: every snapshot, ref, blob and its lock folder
 *   org/name:QUANT          the GGUF file(s) of that quant (all parts of a split one), in every snapshot
 *   org/name/file.gguf      that file, in every snapshot
 *
 * A file is a snapshot link; its blob goes once no link of the repository
 * points at it any more. A snapshot left empty goes with the refs that name
 * it, and a repository left with no snapshot goes whole. A repository that a
 * live kvflash process is downloading into (a .kvflash.lock holding a live
 * pid) is refused. No network.
 */
import { existsSync, lstatSync, readFileSync, readdirSync, readlinkSync, rmSync, rmdirSync, statSync, unlinkSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { ArgumentError } from "../../errors.js";
import type { HubCache } from "./hub-cache.js";
import { type HubModelSpec, formatHubSpec } from "./model-spec.js";
import { chooseGguf, describeQuants } from "./repo-files.js";

export interface RemovedModel {
  /** Snapshot files removed, as "<commit 10>/<path>" (every file of the repository when it went whole). */
  files: string[];
  /** Bytes of the blobs deleted. */
  bytes: number;
  /** The repository folder went whole. */
  repoRemoved: boolean;
}

export function removeCachedModel(cache: HubCache, spec: HubModelSpec): RemovedModel {
  const name = formatHubSpec(spec);
  const repoDir = cache.repoDir(spec.repo);
  if (!existsSync(repoDir)) throw new ArgumentError("MODEL", `${JSON.stringify(name)} is not in the Hugging Face cache (${cache.dir}); kvflash ls lists what is`);
  refuseLiveDownload(cache, spec.repo);
  if (spec.quant === undefined && spec.file === undefined) {
    const files = cache.list().find((r) => r.repo === spec.repo)?.snapshots.flatMap((s) => s.files.map((f) => `${s.commit.slice(0, 10)}/${f}`)) ?? [];
    const bytes = sizeOfFiles(join(repoDir, "blobs"));
    rmSync(repoDir, { recursive: true, force: true });
    rmSync(dirname(cache.lockPath(spec.repo, "x")), { recursive: true, force: true });
    return { files, bytes, repoRemoved: true };
  }

  const snapRoot = join(repoDir, "snapshots");
  const commits = existsSync(snapRoot) ? readdirSync(snapRoot).sort() : [];
  const removed: string[] = [];
  const blobs = new Set<string>();
  let bytes = 0;
  for (const commit of commits) {
    const files = cache.files(spec.repo, commit);
    let chosen: string[];
    if (spec.file !== undefined) chosen = files.includes(spec.file) ? [spec.file] : [];
    else {
      try {
        chosen = chooseGguf(spec.repo, files, spec.quant!);
      } catch {
        chosen = []; // this snapshot has no such quant
      }
    }
    for (const file of chosen) {
      const link = join(cache.snapshotDir(spec.repo, commit), file);
      const blob = linkTarget(link);
      const size = statSync(link).size;
      unlinkSync(link);
      if (blob === link) bytes += size; // a copy (no symlinks here): the file was its own blob
      else if (blob !== null) blobs.add(blob);
      removed.push(`${commit.slice(0, 10)}/${file}`);
      pruneEmptyDirs(dirname(link), cache.snapshotDir(spec.repo, commit));
    }
  }
  if (removed.length === 0) {
    const cached = [...new Set(commits.flatMap((c) => cache.files(spec.repo, c)))];
    throw new ArgumentError("MODEL", `${JSON.stringify(name)} is not in the Hugging Face cache: ${spec.repo} is cached with the GGUF files ${describeQuants(cached)}`);
  }
  // Blobs no remaining link points at.
  const used = new Set(commits.flatMap((c) => linksUnder(cache.snapshotDir(spec.repo, c))).map(linkTarget).filter((b): b is string => b !== null));
  for (const blob of blobs) {
    if (used.has(blob) || !existsSync(blob)) continue;
    bytes += statSync(blob).size;
    rmSync(blob);
  }
  // Snapshots left empty, the refs naming them, then the repository if nothing is left.
  for (const commit of commits) {
    const dir = cache.snapshotDir(spec.repo, commit);
    if (existsSync(dir) && readdirSync(dir).length === 0) {
      rmdirSync(dir);
      removeRefsTo(repoDir, commit);
    }
  }
  const repoRemoved = !existsSync(snapRoot) || readdirSync(snapRoot).length === 0;
  if (repoRemoved) {
    bytes += sizeOfFiles(join(repoDir, "blobs"));
    rmSync(repoDir, { recursive: true, force: true });
  }
  return { files: removed, bytes, repoRemoved };
}

function refuseLiveDownload(cache: HubCache, repo: string): void {
  const locks = dirname(cache.lockPath(repo, "x"));
  if (!existsSync(locks)) return;
  for (const lock of readdirSync(locks).filter((f) => f.endsWith(".kvflash.lock"))) {
    const pid = Number(readFileSync(join(locks, lock), "utf8").trim());
    if (!Number.isSafeInteger(pid) || pid <= 0 || pid === process.pid) continue;
    try {
      process.kill(pid, 0);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EPERM") continue; // gone: a stale lock
    }
    throw new ArgumentError("MODEL", `${repo} is being downloaded by process ${pid} (lock ${join(locks, lock)}); wait for it to finish, or stop it, then remove`);
  }
}

/** The absolute path a snapshot link points at (a copied file: itself), or null if it is not there. */
function linkTarget(link: string): string | null {
  if (!existsSync(link) && !isLink(link)) return null;
  return isLink(link) ? resolve(dirname(link), readlinkSync(link)) : link;
}

const isLink = (p: string): boolean => {
  try {
    return lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
};

function linksUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => !e.isDirectory())
    .map((e) => join(e.parentPath ?? e.path, e.name));
}

/** Removes empty folders from `dir` up to, not including, `stop`. */
function pruneEmptyDirs(dir: string, stop: string): void {
  for (let d = dir; d !== stop && d.startsWith(stop) && existsSync(d) && readdirSync(d).length === 0; d = dirname(d)) rmdirSync(d);
}

function removeRefsTo(repoDir: string, commit: string): void {
  const refs = join(repoDir, "refs");
  for (const ref of linksUnder(refs)) {
    if (readFileSync(ref, "utf8").trim() === commit) {
      rmSync(ref);
      pruneEmptyDirs(dirname(ref), refs);
    }
  }
}

/** Bytes of the files directly in `dir` (the blobs, partial downloads included). */
function sizeOfFiles(dir: string): number {
  if (!existsSync(dir)) return 0;
  return readdirSync(dir).reduce((s, f) => s + lstatSync(join(dir, f)).size, 0);
}

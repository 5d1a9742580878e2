/**
 * The Hugging Face hub cache on disk, in huggingface_hub's layout
 * (huggingface_hub/file_download.py, "Manage your cache"), so the files are
 * shared with huggingface-cli, transformers and vLLM:
 *
 *   <cacheDir>/models--<org>--<name>/
 *     refs/<revision>                 the commit hash a branch or tag pointed at when last resolved
 *     blobs/<etag>                    file contents, named by ETag: sha256 (LFS) or git blob sha1
 *     blobs/<etag>.incomplete         a download in progress (resumed with an HTTP Range request)
 *     snapshots/<commit>/<path>       relative symlink → ../../blobs/<etag> (one more ../ per folder)
 *   <cacheDir>/.locks/models--<org>--<name>/<etag>.kvflash.lock
 *                                     the pid of the kvflash process downloading that blob
 *
 * A blob is renamed into place only once its checksum is verified, and a
 * snapshot link is made only to a verified blob, so a reader never sees a
 * half-written file. A ref is written once every file of the download is in.
 */
import { copyFileSync, existsSync, lstatSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join, relative, sep } from "node:path";

/** A 40-hex git commit hash. */
export const COMMIT_RE = /^[0-9a-f]{40}$/;

export interface CachedSnapshot {
  commit: string;
  /** Refs (branches, tags) that point at this commit; empty for a snapshot fetched by hash. */
  refs: string[];
  /** Repository-relative paths, sorted. */
  files: string[];
  /** Bytes of the snapshot's files (each blob counted once). */
  bytes: number;
  dir: string;
}

export interface CachedRepo {
  /** "org/name" */
  repo: string;
  dir: string;
  snapshots: CachedSnapshot[];
}

export class HubCache {
  /** @param dir the hub cache directory (HubSettings.cacheDir) */
  constructor(readonly dir: string) {}

  /** models--org--name */
  repoDir(repo: string): string {
    return join(this.dir, `models--${repo.split("/").join("--")}`);
  }

  snapshotDir(repo: string, commit: string): string {
    return join(this.repoDir(repo), "snapshots", commit);
  }

  blobPath(repo: string, etag: string): string {
    return join(this.repoDir(repo), "blobs", etag);
  }

  incompletePath(repo: string, etag: string): string {
    return `${this.blobPath(repo, etag)}.incomplete`;
  }

  /** The lock file of a blob's download (beside huggingface_hub's own .locks, under another name). */
  lockPath(repo: string, etag: string): string {
    return join(this.dir, ".locks", `models--${repo.split("/").join("--")}`, `${etag}.kvflash.lock`);
  }

  /** The blob is there, whole (a verified download renamed into place). */
  blobComplete(repo: string, etag: string, size: number): boolean {
    const blob = this.blobPath(repo, etag);
    return existsSync(blob) && statSync(blob).size === size;
  }

  /** The commit a revision resolves to in the cache: a commit hash as itself, a branch or tag through refs/; null if unknown. */
  commitOf(repo: string, revision: string): string | null {
    if (COMMIT_RE.test(revision)) return existsSync(this.snapshotDir(repo, revision)) ? revision : null;
    const ref = join(this.repoDir(repo), "refs", revision);
    if (!existsSync(ref)) return null;
    const commit = readFileSync(ref, "utf8").trim();
    return COMMIT_RE.test(commit) ? commit : null;
  }

  writeRef(repo: string, revision: string, commit: string): void {
    if (revision === commit) return;
    const ref = join(this.repoDir(repo), "refs", revision);
    mkdirSync(dirname(ref), { recursive: true });
    writeAtomically(ref, commit);
  }

  /** The snapshot file's path if it is there and its blob is complete (the link resolves); else null. */
  file(repo: string, commit: string, path: string): string | null {
    const p = join(this.snapshotDir(repo, commit), path);
    return existsSync(p) ? p : null;
  }

  /** The complete files of a snapshot (links whose blob is there), repository-relative with "/". */
  files(repo: string, commit: string): string[] {
    const dir = this.snapshotDir(repo, commit);
    return walk(dir)
      .filter((f) => !f.endsWith(".tmp") && existsSync(join(dir, f)))
      .map((f) => f.split(sep).join("/"));
  }

  /** Links snapshots/<commit>/<path> to blobs/<etag> (a relative symlink; a copy where symlinks are not allowed). */
  link(repo: string, commit: string, path: string, etag: string): string {
    const target = join(this.snapshotDir(repo, commit), path);
    const blob = this.blobPath(repo, etag);
    mkdirSync(dirname(target), { recursive: true });
    const temp = `${target}.${process.pid}.tmp`;
    rmSync(temp, { force: true });
    try {
      symlinkSync(relative(dirname(target), blob), temp);
    } catch {
      copyFileSync(blob, temp);
    }
    renameSync(temp, target);
    return target;
  }

  /** Every cached model repository, its snapshots, their files and sizes. */
  list(): CachedRepo[] {
    if (!existsSync(this.dir)) return [];
    const repos: CachedRepo[] = [];
    for (const entry of readdirSync(this.dir).sort()) {
      if (!entry.startsWith("models--")) continue;
      const dir = join(this.dir, entry);
      const repo = entry.slice("models--".length).replace("--", "/");
      const refs = new Map<string, string[]>();
      for (const ref of walk(join(dir, "refs"))) {
        const commit = readFileSync(join(dir, "refs", ref), "utf8").trim();
        refs.set(commit, [...(refs.get(commit) ?? []), ref.split(sep).join("/")]);
      }
      const snapshots: CachedSnapshot[] = [];
      const snapRoot = join(dir, "snapshots");
      for (const commit of existsSync(snapRoot) ? readdirSync(snapRoot).sort() : []) {
        const snapDir = join(snapRoot, commit);
        const files: string[] = [];
        const seen = new Set<string>();
        let bytes = 0;
        for (const file of walk(snapDir)) {
          const p = join(snapDir, file);
          if (!existsSync(p) || file.endsWith(".tmp")) continue; // a dangling link (blob removed) or a link being made
          files.push(file.split(sep).join("/"));
          const st = statSync(p);
          const key = `${st.dev}:${st.ino}`;
          if (!seen.has(key)) {
            seen.add(key);
            bytes += st.size;
          }
        }
        snapshots.push({ commit, refs: refs.get(commit) ?? [], files, bytes, dir: snapDir });
      }
      repos.push({ repo, dir, snapshots });
    }
    return repos;
  }
}

/** Writes a small file whole or not at all (temp file + rename); the temp file is created anew ("wx"), so a symlink planted under its name is not followed. */
export function writeAtomically(path: string, text: string): void {
  const temp = `${path}.${process.pid}.tmp`;
  rmSync(temp, { force: true });
  writeFileSync(temp, text, { flag: "wx" });
  renameSync(temp, path);
}

/** Relative paths of the files (and symlinks) under `root`, depth first, sorted. */
function walk(root: string, prefix = ""): string[] {
  if (!existsSync(root)) return [];
  const out: string[] = [];
  for (const name of readdirSync(root).sort()) {
    const p = join(root, name);
    const rel = prefix === "" ? name : join(prefix, name);
    const st = lstatSync(p);
    if (st.isDirectory()) out.push(...walk(p, rel));
    else out.push(rel);
  }
  return out;
}

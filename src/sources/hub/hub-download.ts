/**
 * One file from the hub into the cache, as huggingface_hub's
 * http_get/_download_to_tmp_and_move does it: bytes go to
 * blobs/<etag>.incomplete, a cut connection resumes with a Range request
 * (in this run, up to `retries` times, or in the next run), and the blob is
 * renamed into place only when its checksum equals the ETag:
 *
 *   64 hex (LFS)     sha256(content)
 *   40 hex (git)     git's blob id: sha1("blob <size>\0" + content)
 *
 * A wrong checksum deletes the .incomplete file and throws: nothing
 * half-written stays in the cache. The snapshot link is made last.
 *
 * Hostile servers and caches (issue 32): every request that does not finish
 * the file counts against `retries` (a response that ends short as much as a
 * cut one), so a server that announces more bytes than it serves fails after
 * retries + 1 requests instead of looping; a response whose own length
 * (Content-Length of a 200, the total of a 206's Content-Range) disagrees with
 * the size the hub announced fails at once. The .incomplete file is opened
 * with O_NOFOLLOW and checked with lstat, so a symlink planted in its place is
 * removed, never followed out of the cache (huggingface_hub has no such check).
 */
import { createHash, type Hash } from "node:crypto";
import { closeSync, constants, createReadStream, fstatSync, lstatSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { type FileMeta, type HubClient, HubError } from "./hub-client.js";
import type { HubCache } from "./hub-cache.js";

/** What the downloader reports progress to (LoadProgress fits). */
export interface ByteProgress {
  add(bytes: number): void;
}

export interface DownloadFileOptions {
  client: HubClient;
  cache: HubCache;
  repo: string;
  commit: string;
  meta: FileMeta;
  progress?: ByteProgress;
  /** Resumes after a cut connection within this call. Default 3. */
  retries?: number;
  /** Abort a request that receives nothing for this long. Default 60 000 ms. */
  stallMs?: number;
}

export interface DownloadedFile {
  /** The file in the snapshot. */
  path: string;
  /** Bytes received over the network in this call (0 for a blob already in the cache). */
  fetched: number;
}

/** Downloads (or finds) the blob, verifies it, links it into the snapshot. */
export async function downloadFile(options: DownloadFileOptions): Promise<DownloadedFile> {
  const { cache, repo, commit, meta } = options;
  const progress = options.progress ?? { add: () => {} };
  if (cache.blobComplete(repo, meta.etag, meta.size)) {
    progress.add(meta.size);
    return { path: cache.link(repo, commit, meta.path, meta.etag), fetched: 0 };
  }
  const partial = cache.incompletePath(repo, meta.etag);
  mkdirSync(dirname(partial), { recursive: true });
  const unlock = lockBlob(cache.lockPath(repo, meta.etag), `${meta.path} of ${repo}`);
  try {
    return await downloadLocked(options, partial, progress);
  } finally {
    unlock();
  }
}

/**
 * Takes the blob's lock: a file created exclusively, holding our pid. A lock
 * whose process is gone is stale and taken over; a live one is a HubError.
 * Returns the release function.
 */
function lockBlob(path: string, what: string): () => void {
  mkdirSync(dirname(path), { recursive: true });
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, "wx");
      writeSync(fd, String(process.pid));
      closeSync(fd);
      return () => rmSync(path, { force: true });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    }
    const pid = Number(readFileSync(path, "utf8").trim());
    if (Number.isSafeInteger(pid) && pid > 0 && isAlive(pid)) {
      throw new HubError("busy", `another process (pid ${pid}) is downloading ${what}; wait for it to finish, or delete ${path} if that process is not kvflash`);
    }
    rmSync(path, { force: true });
  }
  throw new HubError("busy", `cannot take the download lock ${path}`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

async function downloadLocked(options: DownloadFileOptions, partial: string, progress: ByteProgress): Promise<DownloadedFile> {
  const { cache, repo, commit, meta } = options;
  if (cache.blobComplete(repo, meta.etag, meta.size)) {
    // Another process finished it between the check above and taking the lock.
    progress.add(meta.size);
    return { path: cache.link(repo, commit, meta.path, meta.etag), fetched: 0 };
  }
  const have = resumableBytes(partial, meta.size);
  const state: DownloadState = { have, hash: newHash(meta), fetched: 0 };
  if (have > 0) await hashFile(state.hash, partial);
  progress.add(have);

  const retries = options.retries ?? 3;
  let url = meta.url;
  if (meta.size === 0) closeSync(openPartial(partial, false)); // nothing to fetch, but the blob must exist
  for (let attempt = 0; state.have < meta.size; attempt++) {
    try {
      if (attempt > 0) url = await freshUrl(options, url);
      await fetchInto(options, { ...meta, url }, partial, state, progress);
    } catch (e) {
      if (e instanceof HubError && e.kind === "checksum") rmSync(partial, { force: true });
      // A cut connection surfaces as fetch's TypeError ("terminated") or an abort; disk errors and HubErrors of other kinds are final.
      const cut = (e instanceof HubError && e.kind === "network") || (!(e instanceof HubError) && (e instanceof TypeError || (e as Error).name === "AbortError"));
      if (!cut) throw e;
      if (attempt >= retries) {
        throw new HubError(
          "network",
          `downloading ${meta.path} of ${repo} stopped after ${state.have} of ${meta.size} bytes (${(e as Error).message}); run the command again to resume from there`,
        );
      }
    }
  }
  const digest = state.hash.digest("hex");
  if (digest !== meta.etag) {
    rmSync(partial, { force: true });
    throw new HubError(
      "checksum",
      `${meta.path} of ${repo}: the downloaded bytes have ${meta.etag.length === 64 ? "sha256" : "git sha1"} ${digest}, but the hub's ETag is ${meta.etag}; ` +
        "refused and deleted (nothing was added to the cache). Run again; if it repeats, the mirror or a proxy is altering the file",
    );
  }
  renameSync(partial, cache.blobPath(repo, meta.etag));
  return { path: cache.link(repo, commit, meta.path, meta.etag), fetched: state.fetched };
}

/** O_NOFOLLOW where the platform has it (not on Windows, where creating symlinks needs privileges). */
const NOFOLLOW = constants.O_NOFOLLOW ?? 0;

/** Opens the .incomplete file for writing without following a symlink (O_NOFOLLOW: ELOOP if one was planted since resumableBytes). */
function openPartial(partial: string, append: boolean): number {
  const { O_WRONLY, O_CREAT, O_APPEND, O_TRUNC } = constants;
  return openSync(partial, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC) | NOFOLLOW, 0o644);
}

/**
 * Bytes of the .incomplete file to resume from: 0 when there is none, or when
 * what is there is not a plain file (a symlink, possibly into another part of
 * the disk, is removed, not followed) or is longer than the blob can be.
 */
function resumableBytes(partial: string, size: number): number {
  let st;
  try {
    st = lstatSync(partial);
  } catch {
    return 0;
  }
  if (st.isFile() && st.size <= size) return st.size;
  rmSync(partial, { force: true, recursive: st.isDirectory() });
  return 0;
}

/** sha256 for an LFS ETag; git's blob sha1 (with its "blob <size>\0" header) for a 40-hex ETag. */
function newHash(meta: FileMeta): Hash {
  if (meta.etag.length === 64) return createHash("sha256");
  return createHash("sha1").update(`blob ${meta.size}\0`);
}

async function hashFile(hash: Hash, path: string): Promise<void> {
  const fd = openSync(path, constants.O_RDONLY | NOFOLLOW);
  if (!fstatSync(fd).isFile()) {
    closeSync(fd);
    throw new HubError("protocol", `${path} is not a plain file`);
  }
  for await (const chunk of createReadStream(path, { fd })) hash.update(chunk as Buffer);
}

/** The bytes on disk in the .incomplete file and the running checksum over them. */
interface DownloadState {
  have: number;
  hash: Hash;
  /** Bytes received over the network so far. */
  fetched: number;
}

/** The download URL asked again (a CDN's signed URL expires); the old one if the hub cannot be asked right now. */
async function freshUrl(options: DownloadFileOptions, url: string): Promise<string> {
  try {
    const meta = await options.client.fileMeta(options.repo, options.commit, options.meta.path);
    return meta.etag === options.meta.etag ? meta.url : url;
  } catch {
    return url;
  }
}

/** One GET from `state.have` on, appended to `partial`. Throws on a cut or short response, with `state` matching the bytes on disk. */
async function fetchInto(options: DownloadFileOptions, meta: FileMeta, partial: string, state: DownloadState, progress: ByteProgress): Promise<void> {
  const { client } = options;
  const stallMs = options.stallMs ?? 60_000;
  const abort = new AbortController();
  const stalled = (): void => abort.abort(new HubError("network", `no data for ${stallMs / 1000} s`));
  let stall = setTimeout(stalled, stallMs);
  let res: Response;
  try {
    res = await client.download(meta, state.have, abort.signal);
  } finally {
    clearTimeout(stall);
  }
  let append = true;
  if (state.have > 0 && res.status !== 206) {
    // The server ignored the Range and sends the whole file: start over.
    progress.add(-state.have);
    state.have = 0;
    state.hash = newHash(meta);
    append = false;
  } else if (state.have > 0) {
    const range = /^bytes (\d+)-/.exec(res.headers.get("content-range") ?? "");
    if (range === null || Number(range[1]) !== state.have) {
      await res.body?.cancel();
      throw new HubError("protocol", `${meta.url}: asked for bytes ${state.have}- and got Content-Range ${JSON.stringify(res.headers.get("content-range"))}`, res.status);
    }
  }
  const announced = announcedSize(res);
  if (announced !== null && announced !== meta.size) {
    await res.body?.cancel();
    throw new HubError(
      "protocol",
      `${meta.path}: the server at ${new URL(meta.url).origin} sends a file of ${announced} bytes, but the hub announced ${meta.size}; refused (the mirror, a proxy or the hub's metadata is wrong)`,
      res.status,
    );
  }
  const fd = openPartial(partial, append);
  stall = setTimeout(stalled, stallMs);
  try {
    for await (const chunk of res.body ?? []) {
      stall.refresh();
      const bytes = chunk as Uint8Array;
      if (state.have + bytes.length > meta.size) throw new HubError("checksum", `${meta.path}: the server sent more than the ${meta.size} bytes the hub announced; the download was deleted`);
      writeSync(fd, bytes);
      state.hash.update(bytes);
      state.have += bytes.length;
      state.fetched += bytes.length;
      progress.add(bytes.length);
    }
  } finally {
    clearTimeout(stall);
    closeSync(fd);
  }
  if (state.have < meta.size) throw new HubError("network", `the response ended after ${state.have} of ${meta.size} bytes`);
}

/** The whole file's size as the response states it: a 206's Content-Range total, a 200's Content-Length; null when it states none. */
function announcedSize(res: Response): number | null {
  if (res.status === 206) {
    const total = /\/(\d+)\s*$/.exec(res.headers.get("content-range") ?? "");
    return total === null ? null : Number(total[1]);
  }
  const length = res.headers.get("content-length");
  const encoding = res.headers.get("content-encoding");
  // A compressed body's Content-Length counts the compressed bytes (fetch hands out the decoded ones).
  return length === null || (encoding !== null && encoding !== "identity") ? null : Number(length);
}
